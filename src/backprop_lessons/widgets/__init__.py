"""Interactive steppers and self-checks that work in Jupyter, in Colab and in the
static book.

Every frame (an SVG drawing of the graph plus a short HTML explanation) is
computed in Python when the widget is built and stored in the widget's state.
A small ES module (`stepper.js`, run by anywidget) only switches between
frames, so stepping needs no kernel: the rendered book, where no Python runs,
plays the same frames as a live notebook.  The current frame is the synced
trait `index`, so Python can drive a live widget too.

    BackwardStepper   backward.py: the chain rule applied node by node in
                      reverse order
    TopoSortStepper   toposort.py: the depth-first search that builds the
                      order
    FrameStepper      stepper.py: the frame switcher both steppers are
                      built on
    NumberCheck       selfcheck.py: a question with a numeric answer, checked
                      in the browser
    ChoiceCheck       selfcheck.py: a multiple-choice question, checked in
                      the browser
    self_check        selfcheck.py: one of a chapter's self-checks, by name
                      (the questions live in `exercises`, out of the
                      reader's view)
    reveal_source     reveal.py: the book's version of a function, in a
                      closed box

Where a widget cannot be drawn (an untrusted notebook) its plain text
stands in, cut alike in every runtime (`text`).

The self-checks work the same way: question, answer and feedback are in the
widget's state and `selfcheck.js` judges the reader's answer on the page.

`widgets` may import the engines and `viz`; no engine imports `widgets`.
"""

from .backward import BackwardStepper, backward_frames
from .reveal import SourceReveal, reveal_source
from .selfcheck import ChoiceCheck, NumberCheck, SelfCheck, Verdict, self_check
from .toposort import TopoSortStepper, toposort_frames

__all__ = [
    "BackwardStepper",
    "TopoSortStepper",
    "backward_frames",
    "toposort_frames",
    "NumberCheck",
    "ChoiceCheck",
    "SelfCheck",
    "Verdict",
    "self_check",
    "SourceReveal",
    "reveal_source",
]
