"""Checks for the exercises of "Topological sort and the backward pass"
(chapter 2).

    check_topological_order(order_fn)       the order backward walks, written
                                            with an explicit stack
    check_backward(backward_fn)             the backward loop, `Value.backward`
    check_depth(depth)                      longest path from a leaf
    check_order_function(order_fn)          a fixed order function
    check_readiness_backward(backward_fn)   backward as gradients become ready
    your_engine(add=..., backward=...)      the engine the chapter's network
                                            trains with: each of the reader's
                                            functions once it passes its check

They run the reader's function on graphs the page does not show: a value
used twice by the same node (a + a), diamonds whose two paths differ in
length, a value used at two depths, and a chain 5,000 operations deep,
deeper than Python's recursion limit.  Each check prints "Exercise N: ..."
and returns a `Verdict` (see `checking`); a wrong answer is told by what
the check recognises in it (a value listed twice, the order not reversed,
`=` for `+=`, ...); no hint prints a gradient or a depth the reader is
asked for.

Each check refuses what would do its exercise for the reader
(`run_check`'s refuse=): the package's `topological_order` where the
exercise is the order (exercises 1 and 4) or forbids computing one first
(the readiness backward), `Value.backward` and the other backward loops
of the package where it is the backward, and there PyTorch's autograd and
the book's other ways of differentiating too (`checking.AUTOGRAD`,
`checking.BOOKS_AUTODIFF`).

`SELF_CHECKS` holds the chapter's self-check questions (`questions`).
"""

from __future__ import annotations

import contextlib
import io
import math
import numbers
import sys
from collections import Counter
from collections.abc import Callable

from ..example_graphs import (
    backward_in_order,
    chain,
    diamond,
    is_topological,
    neuron_example,
    relu_example,
    shared_input,
    used_twice,
)
from ..scalar import Value, topological_order
from ..scalar_nn import Engine
from . import value_nodes
from .checking import (
    AUTOGRAD,
    BOOKS_AUTODIFF,
    NotAttempted,
    NotYet,
    Verdict,
    attempt,
    readers_code,
    run_check,
    wrapped,
)
from .questions import Choice, Number

__all__ = [
    "check_topological_order",
    "check_backward",
    "check_depth",
    "check_order_function",
    "check_readiness_backward",
    "your_engine",
    "SELF_CHECKS",
]

# ---- the graphs the order and the backward are graded on ---------------------


def _named(value: Value, label: str) -> Value:
    value.label = label
    return value


def _twice_by_one_node() -> Value:
    """out = (a + a) * c: the + takes a twice."""
    a, c = Value(1.5, label="a"), Value(-2.0, label="c")
    return _named(_named(a + a, "b") * c, "out")


def _uneven_diamond() -> Value:
    """out = s * u with s = p + q and u = 3 * tanh(p), p = x * y: p feeds a
    short path and a longer one, and p is not a leaf."""
    x, y, q = (
        Value(0.5, label="x"),
        Value(-1.25, label="y"),
        Value(2.0, label="q"),
    )
    p = _named(x * y, "p")
    s = _named(p + q, "s")
    t = _named(p.tanh(), "t")
    u = _named(t * Value(3.0, label="3"), "u")
    return _named(s * u, "out")


def _two_depths() -> Value:
    """out = v + relu(v * w) * v with v = x + x * x: v is used at two depths
    and three times, and v's own input x twice."""
    x, w = Value(-0.75, label="x"), Value(-2.0, label="w")
    v = _named(x + _named(x * x, "x*x"), "v")
    r = _named(_named(v * w, "v*w").relu(), "r")
    return _named(v + _named(r * v, "r*v"), "out")


def _long_chain() -> Value:
    """x, then 5,000 operations, alternately * 0.999 and + 0.5: deeper than
    Python's recursion limit."""
    node = Value(0.25, label="x")
    for i in range(5000):
        node = node * 0.999 if i % 2 else node + 0.5
    return _named(node, "out")


def _leaf() -> Value:
    return Value(4.0, label="a lone leaf")


_ORDER_GRAPHS = [
    ("graph out = (a + a) * c", _twice_by_one_node),
    ("diamond out = (p + q) * 3 tanh(p), p = x*y", _uneven_diamond),
    ("graph out = v + relu(v*w) * v, v = x + x*x", _two_depths),
    ("chain 5,000 operations deep", _long_chain),
    ("graph of a lone leaf", _leaf),
]
_BACKWARD_GRAPHS = _ORDER_GRAPHS[:4]

# (name, a function that builds the graph afresh) for every graph the closing
# exercises' checks run on
GRAPHS = [  # named as the messages show them to the reader
    ("relu example f = relu(a*b + d)", relu_example),
    ("neuron o = tanh(x1*w1 + x2*w2 + b)", neuron_example),
    ("graph z = (x*2 + x) * x (x used three times)", shared_input),
    ("diamond w = (y + x) * y, y = x*2", diamond),
    ("graph f = a + a**2, a = x + y (a used at two depths)", used_twice),
    ("graph out = v + relu(v*w) * v, v = x + x*x", _two_depths),
    ("chain of 5000", lambda: chain(5000)),
]


def _name(v: Value) -> str:
    """How a message names a value: its label, else its operation."""
    return v.label or (
        f"the {v._op} node" if v._op else f"the constant {v.data:g}"
    )


def _deep(fn: Callable, root: Value, todo: str, what: str):
    """fn(root) through `attempt`; a RecursionError is told as such, with
    the depth the reader's function reached."""
    try:
        return attempt(fn, root, todo=todo, may_return_none=what == "backward")
    except NotYet as error:
        if not isinstance(error.__cause__, RecursionError):
            raise
        raise NotYet(
            f"your {what} recursed {len(error.where):,} deep and hit Python's "
            f"recursion limit ({sys.getrecursionlimit():,}) on the "
            "chain 5,000 operations deep: use an explicit stack (a list you "
            "push to and pop from) instead of calling itself",
            # the line that calls itself: the one most of the frames are at
            where=Counter(error.where).most_common(1)[0][:1],
        ) from None


# ---- exercise: the topological order -----------------------------------------


def _order_mistake(order: list, root: Value, graph: str) -> str:
    """What is wrong with `order` as a backward order of `root`'s graph, or ""."""
    values = topological_order(root)
    known = {id(v) for v in values}
    strangers = [v for v in order if id(v) not in known]
    if strangers:
        what = strangers[0]
        kind = _name(what) if isinstance(what, Value) else type(what).__name__
        return (
            f"your order on the {graph} holds {kind}, which is not a value "
            "of the graph: list the Values root depends on, root included"
        )
    counts: dict[int, int] = {}
    for v in order:
        counts[id(v)] = counts.get(id(v), 0) + 1
    twice = [v for v in values if counts.get(id(v), 0) > 1]
    if twice:
        return (
            f"your order on the {graph} lists {_name(twice[0])} "
            f"{counts[id(twice[0])]} times: a value reached along several "
            "paths is listed once (remember which values you have visited)"
        )
    missing = [v for v in values if id(v) not in counts]
    if missing:
        more = f" (and {len(missing) - 1:,} more)" if len(missing) > 1 else ""
        return (
            f"your order on the {graph} leaves out {_name(missing[0])}{more}: "
            "every value root depends on is listed, root included"
        )
    if not is_topological(order, root) and is_topological(order[::-1], root):
        return (
            f"your order on the {graph} is reversed: it starts with the root. "
            "List every value after its inputs, the root last (backward then "
            "walks the list from its end). With a stack of jobs, a value's "
            "job of going into the order lies under its inputs' jobs (Hint 1)"
        )
    position = {id(v): i for i, v in enumerate(order)}
    for v in order:
        for child in v._children:
            if position[id(child)] > position[id(v)]:
                return (
                    f"in your order on the {graph}, {_name(v)} comes before "
                    f"{_name(child)}, one of its inputs: backward, walking the "
                    f"list from its end, would process {_name(child)} before "
                    f"{_name(v)} has pushed into it. A value goes into the "
                    "order only once all of its inputs are in it"
                )
    return ""


def check_topological_order(order_fn, *, exercise: int) -> Verdict:
    """order_fn(root) must return a list of every value root depends on,
    root included, each once and after all of its inputs (any such order),
    on graphs up to 5,000 operations deep."""

    def check(order_fn):
        todo = "write my_topological_order(root), return the list, run its cell"
        for graph, build in _ORDER_GRAPHS:
            root = build()
            order = _deep(order_fn, root, todo, "order")
            with readers_code(todo):
                order = list(order)
            mistake = _order_mistake(order, root, graph)
            if mistake:
                raise NotYet(mistake)

    return run_check(exercise, check, order_fn, refuse=(topological_order,))


# ---- exercise: the backward loop ---------------------------------------------

#: What each slip computes (`_backward_with`) and how the check tells it.
_BACKWARD_SLIPS = {
    "assign": "a value used twice (a in a + a) keeps only the last "
    "contribution: your backward assigns (=) where it must add (+=)",
    "not reversed": "your backward walks the order from its first value (a "
    "leaf) to the root; walk it in reverse, the root first, so that a value "
    "has received all of its contributions before it pushes its gradient on",
    "not zeroed": "called on a graph that has been through backward before, "
    "your backward starts from the gradients the last pass left in the "
    "values computed by an operation: set those to 0 first (the leaves keep "
    "theirs: they accumulate)",
    "not zeroed, seed added": "called on a graph that has been through "
    "backward before, your backward adds the seed to the root's old gradient "
    "and starts from the gradients the last pass left in the values computed "
    "by an operation: set those to 0 first, the root among them (the leaves "
    "keep theirs: they accumulate)",
    "leaves zeroed": "your backward zeroes the leaves' gradients too: leaves "
    "(inputs and parameters) keep what they hold and add to it, as in "
    "PyTorch, and the training loop resets them with zero_grad; set only the "
    "values computed by an operation to 0",
    "local only": "each input receives only the local derivative: multiply "
    "it by the gradient of the node that pushes (the chain rule)",
    "upstream only": "each input receives the node's gradient unchanged: "
    "multiply it by the local derivative",
    "subtracted": "your gradients have the wrong sign: add the contribution "
    "(+=), do not subtract it",
}


#: The slips whose gradients do not depend on the order the nodes are
#: processed in: what the readiness backward's check recognises.
_ORDER_FREE_SLIPS = (
    "not zeroed",
    "not zeroed, seed added",
    "leaves zeroed",
    "local only",
    "upstream only",
    "subtracted",
)


def _backward_with(root: Value, slip: str = "") -> None:
    """`Value.backward` (slip ""), or one of the slips of _BACKWARD_SLIPS."""
    order = topological_order(root)
    stale = slip.startswith("not zeroed")  # nothing set to 0
    for node in order:
        if (node._children and not stale) or slip == "leaves zeroed":
            node.grad = 0.0
    root.grad = 1.0 if slip == "not zeroed" else root.grad + 1.0
    for node in order if slip == "not reversed" else reversed(order):
        for child, local in zip(node._children, node._local_grads):
            push = {
                "local only": local,
                "upstream only": node.grad,
            }.get(slip, local * node.grad)
            if slip == "assign":
                child.grad = push
            else:
                child.grad += -push if slip == "subtracted" else push


def _grads(root: Value) -> list[float]:
    return [v.grad for v in topological_order(root)]


def _same(got: list[float], want: list[float]) -> bool:
    return all(
        math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-12) for g, w in zip(got, want)
    )


def _after(build: Callable, before: int, last: Callable) -> list[float]:
    """The gradients of a fresh graph after `before` package backwards and
    then `last(root)`."""
    root = build()
    for _ in range(before):
        root.backward()
    last(root)
    return _grads(root)


def _backward_refusals() -> tuple:
    """What a backward of the reader's may not call: the package's backward
    loops (Value.backward, example_graphs' backward_in_order, the backward
    stepper's frames, this module's own), and any way of differentiating."""
    from ..widgets.backward import backward_frames

    return (
        Value.backward,
        backward_in_order,
        backward_frames,
        _backward_with,
        AUTOGRAD,
        BOOKS_AUTODIFF,
    )


def check_backward(backward_fn, *, exercise: int) -> Verdict:
    """backward_fn(root) must do what `root.backward()` does: set the
    gradient of every value computed by an operation to 0, seed
    d root / d root = 1, and walk the values in reverse topological order,
    adding local derivative times the node's gradient into each input's.
    Leaves keep what they hold and add to it, so a second call on the same
    graph doubles their gradients (the check makes one)."""

    def check(backward_fn):
        todo = "write my_backward(root) and run its cell"
        cases = [(graph, build, 0) for graph, build in _BACKWARD_GRAPHS]
        cases.append(
            ("graph out = (a + a) * c, a second time", _twice_by_one_node, 1)
        )
        for graph, build, before in cases:
            root = build()
            for _ in range(before):
                root.backward()
            _deep(backward_fn, root, todo, "backward")
            got, want = _grads(root), _after(build, before, _backward_with)
            if _same(got, want):
                continue
            if before == 0 and root.grad == 0.0:
                raise NotYet(
                    f"the root's gradient is 0 after your backward on the "
                    f"{graph}, and nothing moves until it is set: start with "
                    "the seed, d root / d root = 1, before any node pushes"
                )
            for slip, hint in _BACKWARD_SLIPS.items():
                wrong = _after(
                    build, before, lambda r, s=slip: _backward_with(r, s)
                )
                if not _same(wrong, want) and _same(got, wrong):
                    raise NotYet(f"on the {graph}: {hint}")
            values = topological_order(root)
            bad = [
                _name(v)
                for v, g, w in zip(values, got, want)
                if not _same([g], [w])
            ]
            more = f" (and {len(bad) - 1:,} more)" if len(bad) > 1 else ""
            raise NotYet(
                f"on the {graph}, the gradient of {bad[0]}{more} is wrong: "
                "see Hint 3 for the loop"
            )

    return run_check(exercise, check, backward_fn, refuse=_backward_refusals())


def _depths(root: Value, pick=max) -> int:
    """root's depth: the operations on the longest path from a leaf
    (`pick=min`: on the shortest)."""
    level: dict[int, int] = {}
    for node in topological_order(root):
        inputs = [level[id(c)] for c in node._children]
        level[id(node)] = 1 + pick(inputs) if inputs else 0
    return level[id(root)]


def _first_input_path(root: Value) -> int:
    """The operations from root down its first inputs to a leaf."""
    steps = 0
    while root._children:
        steps, root = steps + 1, root._children[0]
    return steps


#: A wrong depth's slips: what each gives for a graph (its root, and the
#: right depth), and what the slip is.
_DEPTH_SLIPS = [
    (
        lambda root, right: right + 1,
        "it counts the values on the longest path, not the operations (a "
        "leaf has depth 0)",
    ),
    (
        lambda root, right: right - 1,
        "it is one short: count every operation on the path, the root's own "
        "included",
    ),
    (
        lambda root, right: _depths(root, min),
        "it follows the shortest path from a leaf: the depth is the longest "
        "(the largest of the inputs' depths, plus one)",
    ),
    (
        lambda root, right: _first_input_path(root),
        "it follows each node's first input only: the longest path may go "
        "through any input",
    ),
    (
        lambda root, right: sum(
            1 for v in topological_order(root) if v._children
        ),
        "it counts every operation of the graph, not only those on the "
        "longest path",
    ),
    (
        lambda root, right: len(topological_order(root)),
        "it counts every value of the graph",
    ),
]


def check_depth(depth, *, exercise: int) -> Verdict:
    """depth(root): the number of operations on the longest path from a leaf
    to root (a leaf has depth 0), on graphs the page does not show (diamonds
    whose paths differ in length, a value used at two depths) and on a chain
    5,000 operations deep.  A wrong depth is told by the slip that gives
    the reader's depths on every graph, never by the right depth."""

    def check(depth):
        todo = "write depth(root) and run its cell"
        cases = [
            ("relu example f = relu(a*b + d)", relu_example),
            *_ORDER_GRAPHS[:3],
            ("neuron o = tanh(x1*w1 + x2*w2 + b)", neuron_example),
            ("chain of 5000", lambda: chain(5000)),
            ("graph of a lone leaf", _leaf),
        ]
        results = []
        for name, build in cases:
            root = build()
            got = _deep(depth, root, todo, "depth")
            if isinstance(got, bool) or not isinstance(got, numbers.Real):
                raise NotYet(
                    f"your depth of the {name} is {got!r}: return a whole "
                    "number (an int)"
                )
            results.append((name, root, got, _depths(root)))
        wrong = [(name, got) for name, _, got, right in results if got != right]
        if not wrong:
            return
        name, got = wrong[0]
        for slip, what in _DEPTH_SLIPS:
            if all(got == slip(root, right) for _, root, got, right in results):
                raise NotYet(f"your depth of the {name} is {got!r}: {what}")
        raise NotYet(
            f"your depth of the {name} is {got!r}: it is not the number of "
            "operations on the longest path from a leaf"
        )

    return run_check(exercise, check, depth)


def check_order_function(order_fn, *, exercise: int) -> Verdict:
    """order_fn(root) must list every value once, each after its inputs, so
    that backward in that order gives the engine's gradients; without
    calling the package's `topological_order`."""

    def check(order_fn):
        todo = "write the fixed order function and run its cell"
        for name, build in GRAPHS:
            root = build()
            order = _deep(order_fn, root, todo, "order")
            with readers_code(todo):
                order = list(order)
            mistake = _order_mistake(order, root, name)
            if mistake:
                raise NotYet(mistake)
            backward_in_order(order, root)
            if not _same(_grads(root), _after(build, 0, _in_the_packages_order)):
                raise NotYet(
                    f"backward in this order gives wrong gradients on the {name}"
                )

    return run_check(exercise, check, order_fn, refuse=(topological_order,))


def _in_the_packages_order(root: Value) -> None:
    """example_graphs' backward_in_order, in the package's topological
    order."""
    backward_in_order(topological_order(root), root)


def _ready_counting_users_once(root: Value) -> None:
    """Backward as gradients become ready, with the slip that counts each
    value as awaiting one push, whatever the number of its uses."""
    pending, stack, seen = {}, [root], {id(root)}
    while stack:
        node = stack.pop()
        if node._children:
            node.grad = 0.0
        for child in node._children:
            pending[id(child)] = 1
            if id(child) not in seen:
                seen.add(id(child))
                stack.append(child)
    root.grad += 1.0
    ready = [root]
    while ready:
        node = ready.pop(0)
        for child, local in zip(node._children, node._local_grads):
            child.grad += local * node.grad
            pending[id(child)] -= 1
            if pending[id(child)] == 0:
                ready.append(child)


def _assigns_on_the_probe(backward_fn, todo: str) -> None:
    """Raise the `=` for `+=` slip if backward_fn gives what assigning gives
    on (a + a) * c, where only `a` is shared, by one user: there the slip's
    gradients do not depend on the order the nodes are processed in, as
    they do on the graphs the check runs on."""
    name, build = _ORDER_GRAPHS[0]
    root = build()
    _deep(backward_fn, root, todo, "backward")
    assigned = _after(build, 0, lambda r: _backward_with(r, "assign"))
    if _same(_grads(root), assigned):
        raise NotYet(f"on the {name}: {_BACKWARD_SLIPS['assign']}")


def check_readiness_backward(backward_fn, *, exercise: int) -> Verdict:
    """backward_fn(root) must fill in every gradient, as `root.backward()`
    does (values computed by an operation from 0, leaves adding to what they
    hold), processing a node once all of its users have pushed into it."""

    def check(backward_fn):
        todo = "write backward_when_ready(root) and run its cell"
        cases = [(name, build, 0) for name, build in GRAPHS]
        cases.append(("diamond, a second time", diamond, 1))
        for name, build, before in cases:
            root = build()
            for _ in range(before):
                root.backward()
            _deep(backward_fn, root, todo, "backward")
            got = _grads(root)
            if before == 0 and not any(got):  # a stub that does nothing
                raise NotAttempted(f"{todo} (so far no gradient changes)")
            expected = _after(build, before, Value.backward)
            if _same(got, expected):
                continue
            if _same(got, _after(build, before, _ready_counting_users_once)):
                raise NotYet(
                    f"on the {name}, a value passes its gradient on before "
                    "all of its users have pushed into it: count every use "
                    "of a value (a user that takes it twice counts twice), "
                    "not each user once"
                )
            if before == 0 and root.grad == 0.0:
                raise NotYet(
                    f"the root's gradient is 0 after your backward on the "
                    f"{name}: seed it, d root / d root = 1, before any node "
                    "pushes"
                )
            for slip in _ORDER_FREE_SLIPS:
                wrong = _after(
                    build, before, lambda r, s=slip: _backward_with(r, s)
                )
                if not _same(wrong, expected) and _same(got, wrong):
                    raise NotYet(f"on the {name}: {_BACKWARD_SLIPS[slip]}")
            _assigns_on_the_probe(backward_fn, todo)
            wrong = [
                _name(v)
                for v, g, e in zip(topological_order(root), got, expected)
                if not _same([g], [e])
            ]
            more = f" (and {len(wrong) - 1:,} more)" if len(wrong) > 1 else ""
            raise NotYet(
                f"on the {name}, the gradient of {wrong[0]}{more} is wrong: "
                "see the Why for the counting"
            )

    refuse = (topological_order, *_backward_refusals())
    return run_check(exercise, check, backward_fn, refuse=refuse)


# ---- the engine the chapter's network trains with -----------------------------

#: The network's operations, written by the reader in chapter 1.
OPERATIONS = ("add", "mul", "tanh", "relu")


def _quietly(check: Callable, fn: Callable, exercise: int) -> Verdict:
    with contextlib.redirect_stdout(io.StringIO()):
        return check(fn, exercise=exercise)


def your_engine(*, add, mul, tanh, relu, backward, exercise: int) -> Engine:
    """The `scalar_nn.Engine` the chapter's network trains with: each of
    the reader's functions once it passes its check (chapter 1's for the
    operations, this chapter's exercise `exercise` for the backward), the
    package's own until then.  Prints which, one line per function."""
    yours = {"add": add, "mul": mul, "tanh": tanh, "relu": relu}
    parts = {
        name: (fn, getattr(value_nodes, f"check_{name}"), 0, "chapter 1's check")
        for name, fn in yours.items()
    }
    parts["backward"] = (
        backward,
        check_backward,
        exercise,
        f"exercise {exercise}",
    )
    chosen, lines = {}, []
    for part, (fn, check, number, where) in parts.items():
        verdict = _quietly(check, fn, number)
        chosen[part] = fn if verdict.correct else getattr(Engine(), part)
        whose = "yours" if verdict.correct else "the package's"
        label = getattr(fn, "__name__", part)
        lines.append(f"  {label:<12} {whose} ({where}: {verdict.status})")
        if verdict.attempted and not verdict.correct and verdict.hint:
            # why not yet, under the line, as the check itself would say
            lines.append(wrapped(verdict.hint, indent=" " * 15))
    print(
        "The network trains with each function of yours that passes its "
        "check,\nand with the package's in its place until then:",
        *lines,
        sep="\n",
    )
    return Engine(**chosen)


# ---- self-checks -------------------------------------------------------------

#: The chapter's self-check questions, shown by `widgets.self_check`.
SELF_CHECKS = {
    "backward-order": Choice(
        "For c = a * b and e = c + d, which order can backward process the "
        "nodes in?",
        choices=[
            "a, b, c, d, e",
            "c, e, d, b, a",
            "e, d, c, b, a",
            "d, e, c, a, b",
        ],
        answer=2,
        hint="A node may push its gradient only after every node that uses it "
        "has pushed into it.",
        explanation="e uses c and d, and c uses a and b: so e comes first, and c "
        "before a and b. e, d, c, b, a is the reverse of a "
        "topological order; the others process a node before one of "
        "its users.",
    ),
    "uses-of-x": Number(
        "z = (x * 2 + x) * x, with x a Value. In one backward pass, how many "
        "contributions are added into x.grad?",
        answer=3,
        hint="Count the operations that take x as an input.",
        explanation="x is an input of the first *, of the +, and of the last *: "
        "three pushes, each added with +=, and x passes its gradient "
        "on only after all three (it is a leaf, so nowhere).",
    ),
}
