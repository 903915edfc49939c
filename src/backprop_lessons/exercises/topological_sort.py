"""Checks for the exercises of "Topological sort and the backward pass"
(chapter 2).

    check_depth(depth)                      longest path from a leaf
    check_order_function(order_fn)          a valid topological order
    check_readiness_backward(backward_fn)   backward as gradients become ready

They run the reader's function on the graphs of `example_graphs`, including
a chain 5,000 operations deep (deeper than Python's recursion limit).  Each
prints "Exercise N: ..." and returns a `Verdict` (see `checking`).

`SELF_CHECKS` holds the chapter's self-check questions (`questions`).
"""

from __future__ import annotations

from ..example_graphs import (
    backward_in_order,
    chain,
    diamond,
    is_topological,
    neuron_example,
    relu_example,
    shared_input,
)
from ..gradcheck import close
from ..scalar import Value, topological_order
from .checking import NotAttempted, NotYet, Verdict, attempt, run_check
from .questions import Choice, Number

__all__ = [
    "check_depth",
    "check_order_function",
    "check_readiness_backward",
    "SELF_CHECKS",
]

# (name, a function that builds the graph afresh) for every graph checked
GRAPHS = [  # named as the messages show them to the reader
    ("relu example f = relu(a*b + d)", relu_example),
    ("neuron o = tanh(x1*w1 + x2*w2 + b)", neuron_example),
    ("graph z = (x*2 + x) * x (x used three times)", shared_input),
    ("diamond w = (y + x) * y, y = x*2", diamond),
    ("chain of 5000", lambda: chain(5000)),
]


def _grads_after(order_fn, build) -> list[float]:
    """The gradients of a fresh graph after backward in the order of order_fn."""
    root = build()
    backward_in_order(order_fn(root), root)
    return [v.grad for v in topological_order(root)]


def check_depth(depth, *, exercise: int) -> Verdict:
    """depth(root): the number of operations on the longest path from a leaf
    to root (a leaf has depth 0)."""

    def check(depth):
        todo = "write depth(root) and run its cell"
        cases = [
            ("relu example", relu_example(), 3),
            ("neuron", neuron_example(), 4),
            ("chain of 5000", chain(5000), 5000),
            ("a leaf", Value(1.0), 0),
        ]
        for name, root, expected in cases:
            got = attempt(depth, root, todo=todo)
            if got != expected:
                hint = "" if name != "chain of 5000" else " (no recursion)"
                raise NotYet(
                    f"the depth of the {name} should be {expected}, got {got!r}"
                    f"{hint}"
                )

    return run_check(exercise, check, depth)


def check_order_function(order_fn, *, exercise: int) -> Verdict:
    """order_fn(root) must list every value once, each after its inputs, so
    that backward in that order gives the engine's gradients."""

    def check(order_fn):
        todo = "write the fixed order function and run its cell"
        for name, build in GRAPHS:
            root = build()
            order = attempt(order_fn, root, todo=todo)
            if not is_topological(list(order), root):
                raise NotYet(
                    f"the order for the {name} is not topological: a value must "
                    "come after all of its inputs (and every value once)"
                )
            if _grads_after(order_fn, build) != _grads_after(
                topological_order, build
            ):
                raise NotYet(
                    f"backward in this order gives wrong gradients on the {name}"
                )

    return run_check(exercise, check, order_fn)


def check_readiness_backward(backward_fn, *, exercise: int) -> Verdict:
    """backward_fn(root) must fill in every gradient, as `root.backward()`
    does, processing a node once all of its users have pushed into it."""

    def check(backward_fn):
        todo = "write backward_when_ready(root) and run its cell"
        for name, build in GRAPHS:
            expected_root = build()
            expected_root.backward()
            expected = [v.grad for v in topological_order(expected_root)]
            root = build()
            attempt(backward_fn, root, todo=todo, may_return_none=True)
            got = [v.grad for v in topological_order(root)]
            if all(g == 0.0 for g in got):  # a stub that does nothing
                raise NotAttempted(f"{todo} (so far no gradient changes)")
            wrong = [
                f"{v.label or 'the ' + v._op + ' node'}: {g:g} instead of {e:g}"
                for v, g, e in zip(topological_order(root), got, expected)
                if not close(g, e, 1e-12)
            ]
            if wrong:
                raise NotYet(
                    f"gradients differ on the {name}: {', '.join(wrong[:3])}"
                )

    return run_check(exercise, check, backward_fn)


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
