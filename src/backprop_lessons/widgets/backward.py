"""`BackwardStepper`: the backward pass of a scalar graph, one node at a time.

The frames replay exactly what `Value.backward()` does, starting from zeroed
gradients (the stepper resets them itself, so it shows a clean pass however
often `backward()` ran before):

    frame 0       every gradient is 0
    frame 1       the seed: root.grad = 1
    frame 2, ...  one per value in reverse topological order; a value with
                  inputs pushes its (complete) gradient to each of them:
                  input.grad += local_grad * node.grad

With `per_contribution=True` every `+=` gets a frame of its own, and a
value that is used several times shows how many of its contributions it has
received ("1 of 2"): its gradient grows in steps, and it pushes it on only
once it is complete (the reverse topological order guarantees that).

The user's graph is never touched: the frames keep their own copy of the
gradients, so `grad` of every value is the same before and after.
"""

from __future__ import annotations

from ..scalar import Value, topological_order
from ..validate import flag
from ..viz.graph import HIGHLIGHT, RECEIVED
from .stepper import (
    FrameStepper,
    check_digits,
    check_size,
    chips,
    draw_frame,
    esc,
    legend_html,
    num,
    value_names,
)
from .text import plain_text

__all__ = ["BackwardStepper", "backward_frames"]

RECEIVING = "#ffccbc"  # inputs receiving a contribution in this step
WAITING = "#e1bee7"  # received some of its contributions, not all yet

_LEGEND = [
    (HIGHLIGHT, "node being processed: its gradient is complete"),
    (RECEIVING, "its inputs: receiving a contribution"),
    (RECEIVED, "processed"),
]

_LEGEND_PER_CONTRIBUTION = [
    _LEGEND[0],
    (RECEIVING, "the input receiving this contribution"),
    (WAITING, "incomplete: waits for more contributions"),
    _LEGEND[2],
]


def _draw(
    root,
    order,
    names,
    grads,
    current=None,
    receiving=(),
    done=(),
    digits=4,
    waiting=(),
) -> str:
    """SVG of the graph with the given gradients; colours as in the legend."""
    fills = {id(v): RECEIVED for v in order if id(v) in done}
    fills.update(dict.fromkeys(waiting, WAITING))
    fills.update(dict.fromkeys(receiving, RECEIVING))
    op_fills = {}
    if current is not None:
        fills[id(current)] = op_fills[id(current)] = HIGHLIGHT
    return draw_frame(
        root,
        order,
        names,
        fills=fills,
        grads=grads,
        op_fills=op_fills,
        digits=digits,
    )


def _formula(node, names) -> str:
    """`c * d`, `relu(e)`, `x**2`: how a value was computed, in its inputs'
    names."""
    ins = [esc(names[id(c)]) for c in node._children]
    op = esc(node._op)
    if len(ins) == 2:
        return f"{ins[0]} {op} {ins[1]}"
    if op.startswith("**"):
        return f"{ins[0]}{op}"
    return f"{op}({', '.join(ins)})"


def _grads_html(order, names, grads, changed, counts=None) -> str:
    """The gradients as chips; with `counts` ({id: (received, uses)}) a value
    used more than once also shows how many contributions it has."""
    items = []
    for v in order:
        cls = ' class="bl-changed"' if id(v) in changed else ""
        text = f"{esc(names[id(v)])} <b>{num(grads[id(v)])}</b>"
        if counts is not None and counts[id(v)][1] > 1:
            got, uses = counts[id(v)]
            text += f" <small>{got} of {uses}</small>"
        items.append(f"<span{cls}>{text}</span>")
    return chips(items)


def _uses(order) -> dict[int, int]:
    """How many contributions each value receives in backward: once per use
    as an input (a repeated input counts twice); the root gets the seed."""
    uses = {id(v): 0 for v in order}
    for v in order:
        for child in v._children:
            uses[id(child)] += 1
    uses[id(order[-1])] = 1
    return uses


def backward_frames(
    root: Value, digits: int = 4, per_contribution: bool = False
) -> list[dict]:
    """All frames of the backward pass from `root` (see the module docstring).

    `per_contribution=True`: one frame per `+=` instead of one per value."""
    if not isinstance(root, Value):
        raise TypeError(
            "BackwardStepper: expected a Value as the root, got "
            f"{type(root).__name__}"
        )
    order = topological_order(root)
    check_size(order, "BackwardStepper")
    digits = check_digits(digits, "BackwardStepper")
    if flag("BackwardStepper", "per_contribution", per_contribution):
        return _contribution_frames(root, order, digits)
    names = value_names(order)
    rname = esc(names[id(root)])
    grads = {id(v): 0.0 for v in order}
    frames = []

    def frame(
        caption, html, node=None, updates=(), current=None, receiving=(), done=()
    ):
        return {
            "caption": caption,
            "html": html,
            "svg": _draw(
                root, order, names, grads, current, receiving, done, digits
            ),
            "node": None if node is None else names[id(node)],
            "updates": list(updates),
            "grads": {names[id(v)]: grads[id(v)] for v in order},
        }

    frames.append(
        frame(
            "Start: every gradient is 0.",
            "<p>The stepper sets every <code>grad</code> to 0 first, so it "
            "always shows a "
            f"clean pass. Next: seed the output <b>{rname}</b>.</p>"
            + f'<div class="bl-row"><span class="bl-key">grads</span>'
            f"{_grads_html(order, names, grads, ())}</div>",
        )
    )

    grads[id(root)] = 1.0
    frames.append(
        frame(
            f"Seed: {rname}.grad = 1, because ∂{rname}/∂{rname} = 1.",
            "<p>The gradient of the output with respect to itself is 1. Now "
            "walk the "
            f"{len(order)} values in reverse topological order.</p>"
            + f'<div class="bl-row"><span class="bl-key">grads</span>'
            f"{_grads_html(order, names, grads, {id(root)})}</div>",
            node=root,
            receiving={id(root)},
        )
    )

    done: set[int] = set()
    for k, node in enumerate(reversed(order), start=1):
        n = esc(names[id(node)])
        g = grads[id(node)]
        updates, changed, rows = [], set(), []
        for child, local in zip(node._children, node._local_grads):
            before = grads[id(child)]
            contribution = local * g
            grads[id(child)] = before + contribution
            changed.add(id(child))
            c = esc(names[id(child)])
            updates.append(
                {
                    "input": names[id(child)],
                    "local": local,
                    "upstream": g,
                    "contribution": contribution,
                    "before": before,
                    "after": grads[id(child)],
                }
            )
            rows.append(
                f"<tr><td>{c}</td><td>{num(local)}</td><td>{num(g)}</td>"
                f"<td>{num(contribution)}</td>"
                f"<td>{num(before)} &rarr; "
                f"<b>{num(grads[id(child)])}</b></td></tr>"
            )
        head = f"Value {k} of {len(order)} in reverse order: "
        if node._children:
            caption = (
                head + f"{n} = {_formula(node, names)} pushes its gradient "
                f"{num(g)} to its input{'s' if len(node._children) > 1 else ''}."
            )
            html = (
                f"<p>Chain rule: <code>input.grad += (∂{n}/∂input) &times; "
                f"∂{rname}/∂{n}</code></p>"
                f'<table class="bl-table"><thead><tr><th>input</th>'
                f"<th>local ∂{n}/∂input</th><th>upstream ∂{rname}/∂{n}</th>"
                f"<th>contribution</th><th>input.grad</th></tr></thead>"
                f"<tbody>{''.join(rows)}</tbody></table>"
            )
        else:
            caption = (
                head + f"{n} is a leaf: its gradient {num(g)} is final; "
                "nothing to push."
            )
            html = (
                f"<p>{n} was made from no other value (an input, parameter or "
                f"constant), so the walk has nothing to pass on.</p>"
            )
        if k == len(order):
            caption += " Backward pass complete."
        html += (
            f'<div class="bl-row"><span class="bl-key">grads</span>'
            f"{_grads_html(order, names, grads, changed)}</div>"
        )
        frames.append(
            frame(
                caption,
                html,
                node=node,
                updates=updates,
                current=node,
                receiving=changed,
                done=done,
            )
        )
        done.add(id(node))
    return frames


def _all(count: int) -> str:
    return "both" if count == 2 else f"all {count}"


def _contribution_frames(root, order, digits) -> list[dict]:
    """One frame per `+=`: see `backward_frames(per_contribution=True)`."""
    names = value_names(order)
    rname = esc(names[id(root)])
    grads = {id(v): 0.0 for v in order}
    uses = _uses(order)
    received = {id(v): 0 for v in order}
    done: set[int] = set()
    frames = []

    def counts():
        return {i: (received[i], uses[i]) for i in uses}

    def waiting():
        return {i for i in uses if 0 < received[i] < uses[i]}

    def grads_row(changed):
        return (
            f'<div class="bl-row"><span class="bl-key">grads</span>'
            f"{_grads_html(order, names, grads, changed, counts())}</div>"
        )

    def frame(caption, html, node=None, updates=(), receiving=()):
        return {
            "caption": caption,
            "html": html + grads_row(receiving),
            "svg": _draw(
                root,
                order,
                names,
                grads,
                node,
                receiving,
                done,
                digits,
                waiting() - set(receiving),
            ),
            "node": None if node is None else names[id(node)],
            "updates": list(updates),
            "grads": {names[id(v)]: grads[id(v)] for v in order},
            "received": {
                names[id(v)]: [received[id(v)], uses[id(v)]] for v in order
            },
        }

    frames.append(
        frame(
            "Start: every gradient is 0.",
            "<p>One step per <code>+=</code>. A value used more than once "
            "shows how many of its contributions it has received "
            "(<i>1 of 2</i>).</p>",
        )
    )
    grads[id(root)] = 1.0
    received[id(root)] = 1
    frames.append(
        frame(
            f"Seed: {rname}.grad = 1, because ∂{rname}/∂{rname} = 1.",
            "<p>Now walk the values in reverse topological order.</p>",
            receiving={id(root)},
        )
    )
    total = len(order)
    for k, node in enumerate(reversed(order), start=1):
        n = esc(names[id(node)])
        g = grads[id(node)]
        head = f"Value {k} of {total} in reverse order: "
        complete = (
            f"{n} has {_all(uses[id(node)])} of its contributions, so its "
            f"gradient {num(g)} is complete"
            if uses[id(node)] > 1
            else f"{n}'s gradient {num(g)} is complete"
        )
        if not node._children:
            caption = head + f"{n} is a leaf: {complete}; nothing to push."
            if k == total:
                caption += " Backward pass complete."
            frames.append(
                frame(
                    caption,
                    f"<p>{n} was made from no other value, so the walk has "
                    "nothing to pass on.</p>",
                    node=node,
                )
            )
            done.add(id(node))
            continue
        pairs = list(zip(node._children, node._local_grads))
        for j, (child, local) in enumerate(pairs, start=1):
            c = esc(names[id(child)])
            before = grads[id(child)]
            contribution = local * g
            grads[id(child)] = before + contribution
            received[id(child)] += 1
            got, want = received[id(child)], uses[id(child)]
            update = {
                "input": names[id(child)],
                "local": local,
                "upstream": g,
                "contribution": contribution,
                "before": before,
                "after": grads[id(child)],
                "received": got,
                "uses": want,
            }
            if want == 1:
                status = f"{c} has its only contribution: complete."
            elif got < want:
                status = (
                    f"{c} has {got} of its {want} contributions: not complete, "
                    "it waits."
                )
            else:
                status = f"{c} has {_all(want)} of its contributions: complete."
            caption = (
                head
                + (f"{complete}. " if j == 1 else "")
                + f"{n} = {_formula(node, names)} pushes to {c} "
                f"(input {j} of {len(pairs)}): {c}.grad {num(before)} → "
                f"{num(grads[id(child)])}. {status}"
            )
            if k == total and j == len(pairs):
                caption += " Backward pass complete."
            html = (
                f"<p>Chain rule: <code>{c}.grad += (∂{n}/∂{c}) &times; "
                f"∂{rname}/∂{n}</code></p>"
                f'<table class="bl-table"><thead><tr><th>input</th>'
                f"<th>local ∂{n}/∂input</th><th>upstream ∂{rname}/∂{n}</th>"
                f"<th>contribution</th><th>input.grad</th>"
                f"<th>received</th></tr></thead><tbody>"
                f"<tr><td>{c}</td><td>{num(local)}</td><td>{num(g)}</td>"
                f"<td>{num(contribution)}</td>"
                f"<td>{num(before)} &rarr; <b>{num(grads[id(child)])}</b></td>"
                f"<td>{got} of {want}</td></tr></tbody></table>"
            )
            frames.append(
                frame(
                    caption,
                    html,
                    node=node,
                    updates=[update],
                    receiving={id(child)},
                )
            )
        done.add(id(node))
    return frames


class BackwardStepper(FrameStepper):
    """Step through `root.backward()`: the graph, the current node, the chain-rule
    update.

    >>> stepper = BackwardStepper(f)   # doctest: +SKIP
    >>> stepper                        # in Jupyter: the interactive widget
    BackwardStepper(7 steps on a graph of 6 values)
    """

    def __init__(
        self,
        root: Value,
        *,
        digits: int = 4,
        per_contribution: bool = False,
        **kwargs,
    ):
        frames = backward_frames(
            root, digits=digits, per_contribution=per_contribution
        )
        self._n_values = len(frames[0]["grads"])
        if per_contribution:
            kwargs.setdefault("title", "Backward pass, one += at a time")
            legend = legend_html(_LEGEND_PER_CONTRIBUTION)
        else:
            kwargs.setdefault("title", "Backward pass, one node at a time")
            legend = legend_html(_LEGEND)
        super().__init__(frames=frames, legend=legend, **kwargs)

    def __repr__(self) -> str:
        graph = f"a graph of {self._n_values} values"
        return plain_text(f"BackwardStepper({self.steps} steps on {graph})")
