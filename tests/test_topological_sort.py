"""Tests of chapter 2's checks on the main path (`exercises.topological_sort`):
the order the reader writes with a stack of their own, the backward loop,
and the engine the chapter's network trains with.

Each check gets a right answer, a stub, every slip it names (the hint must
name it), a raising answer (its line quoted) and, where it applies, a
recursive answer on the chain 5,000 operations deep.
"""

from __future__ import annotations

from collections import deque
from functools import partial

import pytest

from backprop_lessons import example_graphs
from backprop_lessons.example_graphs import backward_in_order
from backprop_lessons.exercises import topological_sort
from backprop_lessons.exercises.checking import WIDTH
from backprop_lessons.exercises.topological_sort import (
    check_backward,
    check_depth,
    check_order_function,
    check_readiness_backward,
    check_topological_order,
    your_engine,
)
from backprop_lessons.scalar import Value, topological_order
from backprop_lessons.scalar_nn import Engine
from verdicts import assert_verdict, run


def stub(root):
    raise NotImplementedError


def stub_ellipsis(root): ...


def stub_any(*args):
    raise NotImplementedError


# ---- exercise: the order ------------------------------------------------------


def iterative_order(root):
    order, visited, stack = [], set(), [(root, False)]
    while stack:
        node, inputs_done = stack.pop()
        if inputs_done:
            order.append(node)
        elif id(node) not in visited:
            visited.add(id(node))
            stack.append((node, True))
            stack.extend((child, False) for child in node._children)
    return order


def kahn_order(root):
    """Another valid order: every value once its inputs are all listed."""
    waiting, users, nodes, stack, seen = {}, {}, [], [root], {id(root)}
    while stack:
        node = stack.pop()
        nodes.append(node)
        waiting[id(node)] = len(node._children)
        for child in node._children:
            users.setdefault(id(child), []).append(node)
            if id(child) not in seen:
                seen.add(id(child))
                stack.append(child)
    ready, order = deque(n for n in nodes if not waiting[id(n)]), []
    while ready:
        node = ready.popleft()
        order.append(node)
        for user in users.get(id(node), []):
            waiting[id(user)] -= 1
            if not waiting[id(user)]:
                ready.append(user)
    return order


def recursive_order(root):
    order, visited = [], set()

    def visit(node):
        if id(node) not in visited:
            visited.add(id(node))
            for child in node._children:
                visit(child)
            order.append(node)

    visit(root)
    return order


def preorder_reversed(root):
    """A value goes in when first reached, not when its inputs are done."""
    order, visited, stack = [], set(), [root]
    while stack:
        node = stack.pop()
        if id(node) not in visited:
            visited.add(id(node))
            order.insert(0, node)
            stack.extend(node._children)
    return order


def without_visited_set(root):
    order, stack = [], [(root, False)]
    while stack:
        node, inputs_done = stack.pop()
        if inputs_done:
            order.append(node)
        else:
            stack.append((node, True))
            stack.extend((child, False) for child in node._children)
    return order


def raising_order(root):
    return [root._parents]  # no such attribute


def test_the_order_check_takes_any_valid_order(capsys):
    for right in (iterative_order, kahn_order):
        assert run(check_topological_order, right, capsys).correct


def graph_order_module(root):
    from backprop_lessons import graph_order

    return graph_order.topological_order(root)


@pytest.mark.parametrize("check", [check_topological_order, check_order_function])
@pytest.mark.parametrize(
    "gaming",
    [
        topological_order,  # the package's own, handed over as the answer
        lambda root: topological_order(root),  # a name bound at import
        graph_order_module,  # through its module
        lambda root: list(topological_order(root)),
    ],
)
def test_the_packages_order_is_refused(check, gaming, capsys):
    """Exercises 1 and 4 ask for the order itself: the package's is
    refused, named, however it is reached."""
    verdict = run(check, gaming, capsys)
    assert_verdict(
        verdict,
        "not yet",
        "your code called backprop_lessons.graph_order.topological_order, "
        "the book's own version of what this exercise asks you to write",
    )


@pytest.mark.parametrize(
    "wrong, hints",
    [
        (preorder_reversed, ["comes before", "one of its inputs"]),
        (without_visited_set, ["lists a 2 times", "listed once"]),
        (lambda root: iterative_order(root)[1:], ["leaves out"]),
        (lambda root: iterative_order(root)[:-1], ["leaves out out"]),
        (lambda root: iterative_order(root)[::-1], ["is reversed", "(Hint 1)"]),
        (lambda root: [*iterative_order(root), 1.5], ["holds float"]),
        (
            lambda root: [*iterative_order(root), Value(0.0)],
            ["the constant 0, which is not a value of the graph"],
        ),
    ],
)
def test_the_order_check_names_each_slip(wrong, hints, capsys):
    assert_verdict(run(check_topological_order, wrong, capsys), "not yet", *hints)


def test_a_recursive_order_is_told_it_recursed(capsys):
    verdict = run(check_topological_order, recursive_order, capsys)
    assert_verdict(
        verdict, "not yet", "your order recursed", "use an explicit stack"
    )
    depth = int(
        verdict.hint.split("recursed ")[1].split(" deep")[0].replace(",", "")
    )
    assert 500 < depth <= 1000
    (line,) = verdict.where  # the line that recursed, not 1,000 of them
    assert line.startswith("in visit, line ") and line.endswith(": visit(child)")


def test_the_order_check_on_stubs_and_raising_answers(capsys):
    for answer in (stub, stub_ellipsis, lambda root: None):
        assert_verdict(
            run(check_topological_order, answer, capsys),
            "not attempted yet",
            "my_topological_order(root)",
        )
    verdict = run(check_topological_order, raising_order, capsys)
    assert_verdict(verdict, "not yet", "your code raised AttributeError")
    assert verdict.where[-1].endswith(
        "return [root._parents] # no such attribute"
    )


# ---- exercise: the backward loop ---------------------------------------------


def backward_loop(
    root,
    *,
    zero=True,
    leaves=False,
    seed="=",
    reverse=True,
    push="+=",
    term="local * g",
):
    """The backward loop, right with the defaults; each argument one slip."""
    order = topological_order(root)
    for node in order:
        if (zero and node._children) or leaves:
            node.grad = 0.0
    if seed == "=":
        root.grad = 1.0
    elif seed == "+=":
        root.grad += 1.0
    for node in reversed(order) if reverse else order:
        g = node.grad
        for child, local in zip(node._children, node._local_grads):
            value = {
                "local * g": local * g,
                "local": local,
                "g": g,
                "local * root": local * root.grad,
                "local + g": local + g,
            }[term]
            if push == "+=":
                child.grad += value
            elif push == "-=":
                child.grad -= value
            else:
                child.grad = value


def test_the_backward_check_takes_the_loop(capsys):
    assert run(check_backward, backward_loop, capsys).correct
    seed_added = lambda root: backward_loop(root, seed="+=")  # noqa: E731
    assert run(check_backward, seed_added, capsys).correct  # the same, zeroed


def backward_by_torch(root):
    """The graph rebuilt in PyTorch, one tensor per value (a node as its
    local derivatives times its inputs: the same gradients), and
    torch.autograd.grad for them."""
    import torch

    order = kahn_order(root)  # the reader's own order
    tensors = {}
    for v in order:
        if v._children:
            tensors[id(v)] = sum(
                local * tensors[id(c)]
                for c, local in zip(v._children, v._local_grads)
            )
        else:
            tensors[id(v)] = torch.tensor(v.data, requires_grad=True)
    leaves = [v for v in order if not v._children]
    grads = torch.autograd.grad(
        tensors[id(root)], [tensors[id(v)] for v in leaves]
    )
    for v, g in zip(leaves, grads):
        v.grad += g.item()


def backward_by_the_engine_of_the_network(root):
    Engine().backward(root)  # the package's, through a method of its engine


def backward_by_the_stepper(root):
    from backprop_lessons.widgets import backward_frames

    backward_frames(root)


BACKWARD_GAMING = [
    (Value.backward, "Value.backward, the book's own version"),
    (lambda root: root.backward(), "Value.backward, the book's own version"),
    (backward_by_the_engine_of_the_network, "Value.backward"),
    (
        lambda root: backward_in_order(kahn_order(root), root),
        "example_graphs.backward_in_order, the book's own version",
    ),
    (
        lambda root: example_graphs.backward_in_order([root], root),
        "example_graphs.backward_in_order",
    ),
    (backward_by_the_stepper, "widgets.backward.backward_frames"),
    (
        lambda root: topological_sort._backward_with(root),
        "topological_sort._backward_with",
    ),
    (backward_by_torch, "torch.autograd.grad, PyTorch's autograd"),
]


@pytest.mark.parametrize("gaming, called", BACKWARD_GAMING)
def test_the_packages_backward_and_autograd_are_refused(gaming, called, capsys):
    """Exercise 2 asks for the backward loop: the package's own backward,
    however reached (the method, the engine's, example_graphs' loop, the
    stepper's frames, the check's own), and PyTorch's autograd are refused
    and named."""
    verdict = run(check_backward, gaming, capsys)
    assert_verdict(verdict, "not yet", "your code called")
    assert called in verdict.hint, verdict.hint


@pytest.mark.parametrize(
    "slip, hints",
    [
        ({"push": "="}, ["assigns (=) where it must add (+=)"]),
        ({"reverse": False}, ["walk it in reverse"]),
        ({"seed": None}, ["root's gradient is 0", "seed"]),
        ({"zero": False}, ["a second time", "set those to 0 first"]),
        (
            {"zero": False, "seed": "+="},
            ["adds the seed to the root's old gradient"],
        ),
        ({"leaves": True}, ["zeroes the leaves' gradients too"]),
        ({"term": "local"}, ["only the local derivative"]),
        ({"term": "g"}, ["the node's gradient unchanged"]),
        # with the seed 1, local * root.grad is local: the same slip
        ({"term": "local * root"}, ["only the local derivative"]),
        ({"push": "-="}, ["wrong sign"]),
        ({"term": "local + g"}, ["the gradient of", "see Hint 3"]),
    ],
)
def test_the_backward_check_names_each_slip(slip, hints, capsys):
    verdict = run(
        check_backward, lambda root: backward_loop(root, **slip), capsys
    )
    assert_verdict(verdict, "not yet", *hints)


def test_the_backward_check_on_stubs_and_raising_answers(capsys):
    assert_verdict(
        run(check_backward, stub, capsys),
        "not attempted yet",
        "my_backward(root)",
    )
    # a backward that does nothing is told what comes first: the seed
    verdict = run(check_backward, stub_ellipsis, capsys)
    assert_verdict(verdict, "not yet", "nothing moves until it is set")

    def my_backward(root):
        order = topological_order(root)
        root.grad = 1.0
        for node in reversed(order):
            node.push()  # Values have no such method

    verdict = run(check_backward, my_backward, capsys)
    assert_verdict(verdict, "not yet", "your code raised AttributeError")
    assert verdict.where[-1].endswith("node.push() # Values have no such method")


def test_a_recursive_backward_is_told_it_recursed(capsys):
    def recursive_backward(root):
        order = recursive_order(root)  # recursion, deep on the chain
        for node in order:
            if node._children:
                node.grad = 0.0
        root.grad = 1.0
        for node in reversed(order):
            for child, local in zip(node._children, node._local_grads):
                child.grad += local * node.grad

    verdict = run(check_backward, recursive_backward, capsys)
    assert_verdict(verdict, "not yet", "your backward recursed", "explicit stack")


# ---- the closing exercise on readiness: the mutant the issue names -------------


def test_readiness_that_counts_each_value_once_fails(capsys):
    """A value awaited as one push, whatever its number of uses, passes its
    gradient on too early where its users sit at two depths (a in
    f = a + a**2): the mutation test's survivor (issue 46)."""

    def counts_once(root):
        readiness_backward(root, counts=False)

    verdict = run(check_readiness_backward, counts_once, capsys)
    assert_verdict(verdict, "not yet", "a used at two depths", "count every use")


def readiness_backward(root, *, leaves=False, counts=True, push="+="):
    """Backward as gradients become ready, right with the defaults; each
    argument one slip (`leaves`: zero the leaves too; `counts=False`: each
    value awaited as one push; `push`: "+=", "-=", "=" or "local")."""
    pending, stack, seen = {}, [root], {id(root)}
    while stack:
        node = stack.pop()
        if node._children or leaves:
            node.grad = 0.0
        for child in node._children:
            pending[id(child)] = pending.get(id(child), 0) + 1 if counts else 1
            if id(child) not in seen:
                seen.add(id(child))
                stack.append(child)
    root.grad = 1.0
    ready = deque([root])
    while ready:
        node = ready.popleft()
        for child, local in zip(node._children, node._local_grads):
            if push == "local":
                child.grad += local
            elif push == "=":
                child.grad = local * node.grad
            else:
                child.grad += local * node.grad * (-1 if push == "-=" else 1)
            pending[id(child)] -= 1
            if pending[id(child)] == 0:
                ready.append(child)


def test_readiness_takes_a_right_answer(capsys):
    assert run(check_readiness_backward, readiness_backward, capsys).correct


def test_readiness_names_assigning_where_it_must_add(capsys):
    """`=` for `+=` (the live trial's slip): named, although on the check's
    graphs what it gives depends on the order of the ready values."""
    verdict = run(
        check_readiness_backward, partial(readiness_backward, push="="), capsys
    )
    assert verdict.status == "not yet"
    assert "assigns (=) where it must add (+=)" in verdict.hint, verdict.hint


@pytest.mark.parametrize(
    "slip, hints",
    [
        ({"leaves": True}, ["diamond, a second time", "zeroes the leaves"]),
        ({"push": "-="}, ["wrong sign"]),
        ({"push": "local"}, ["only the local derivative"]),
        ({"counts": False}, ["count every use"]),
    ],
)
def test_readiness_names_each_slip_without_a_gradient(slip, hints, capsys):
    """Leaves accumulate, values computed by an operation start from 0; a
    slip is named, and no gradient the reader must find is printed."""
    verdict = run(
        check_readiness_backward,
        lambda root: readiness_backward(root, **slip),
        capsys,
    )
    assert_verdict(verdict, "not yet", *hints)
    assert "instead of" not in verdict.hint


def test_readiness_of_an_unknown_slip_names_the_values_not_their_gradients(
    capsys,
):
    def off_by_a_bit(root):
        readiness_backward(root)
        for v in kahn_order(root):
            if not v._children:
                v.grad *= 1.01

    verdict = run(check_readiness_backward, off_by_a_bit, capsys)
    assert_verdict(verdict, "not yet", "the gradient of", "is wrong")
    assert not any(ch.isdigit() for ch in verdict.hint.split("is wrong")[1])


@pytest.mark.parametrize(
    "gaming, called",
    [
        (
            lambda root: readiness_backward(root) or topological_order(root),
            "graph_order.topological_order",
        ),
        *BACKWARD_GAMING,
    ],
)
def test_readiness_refuses_an_order_and_the_packages_backward(
    gaming, called, capsys
):
    """Exercise 5 computes no topological order first, and refuses the
    package's backward and autograd as exercise 2 does."""
    verdict = run(check_readiness_backward, gaming, capsys)
    assert_verdict(verdict, "not yet", "your code called")
    assert called in verdict.hint, verdict.hint


# ---- exercise: the depth -----------------------------------------------------


def depth(root, pick=max):
    """The depth (`pick=min`: the shortest path's, a slip)."""
    level = {}
    for node in topological_order(root):
        inputs = (level[id(c)] for c in node._children)
        level[id(node)] = 1 + pick(inputs, default=-1)
    return level[id(root)]


def shortest(root):
    return depth(root, min)


def first_input_only(root):
    steps = 0
    while root._children:
        steps, root = steps + 1, root._children[0]
    return steps


def recursive_depth(root):
    return 1 + max(map(recursive_depth, root._children), default=-1)


def test_the_depth_check_takes_a_right_answer_and_a_stub(capsys):
    assert run(check_depth, depth, capsys).correct
    assert run(check_depth, stub, capsys).status == "not attempted yet"


@pytest.mark.parametrize(
    "wrong, hints",
    [
        (lambda root: depth(root) + 1, ["counts the values", "depth 0"]),
        (lambda root: depth(root) - 1, ["one short"]),
        (shortest, ["shortest path", "relu example"]),
        (first_input_only, ["first input only"]),
        (
            lambda root: sum(1 for v in topological_order(root) if v._children),
            ["every operation of the graph"],
        ),
        (lambda root: len(topological_order(root)), ["every value"]),
        (lambda root: str(depth(root)), ["a whole number"]),
        (recursive_depth, ["recursed", "explicit stack"]),
        (lambda root: 3, ["is 3: it is not the number of operations"]),
    ],
)
def test_the_depth_check_names_each_slip_without_the_depth(wrong, hints, capsys):
    """Chapter 2's exercise 3 printed the expected depth ("should be 3"): a
    table of the printed depths would pass.  Now a slip is named, the
    reader's own number quoted, never the right one; and the graphs it
    runs on are not the page's."""
    verdict = run(check_depth, wrong, capsys)
    assert_verdict(verdict, "not yet", *hints)
    assert "should be" not in verdict.hint


def test_a_table_of_the_pages_depths_does_not_pass(capsys):
    pages = {"f": 3, "o": 4}  # the relu example's and the neuron's
    verdict = run(check_depth, lambda root: pages.get(root.label, 0), capsys)
    assert_verdict(verdict, "not yet", "graph out = (a + a) * c")


# ---- the engine the network trains with ----------------------------------------


def my_add(a, b):
    return Value(a.data + b.data, "", (a, b), (1.0, 1.0), "+")


def my_mul(a, b):
    return Value(a.data * b.data, "", (a, b), (b.data, a.data), "*")


def my_tanh(a):
    t = Value(a.data).tanh().data
    return Value(t, "", (a,), (1.0 - t * t,), "tanh")


def my_relu(a):
    on = a.data > 0
    return Value(a.data if on else 0.0, "", (a,), (1.0 if on else 0.0,), "relu")


def test_the_engine_is_yours_where_it_passes(capsys):
    engine = your_engine(
        add=my_add,
        mul=my_mul,
        tanh=stub_any,
        relu=my_relu,
        backward=backward_loop,
        exercise=2,
    )
    assert engine == Engine(
        add=my_add, mul=my_mul, relu=my_relu, backward=backward_loop
    )
    printed = capsys.readouterr().out.splitlines()
    assert printed[2:] == [
        "  my_add       yours (chapter 1's check: correct)",
        "  my_mul       yours (chapter 1's check: correct)",
        "  stub_any     the package's (chapter 1's check: not attempted yet)",
        "  my_relu      yours (chapter 1's check: correct)",
        "  backward_loop yours (exercise 2: correct)",
    ]


def test_an_engine_of_stubs_is_the_packages(capsys):
    engine = your_engine(
        add=stub_any,
        mul=stub_any,
        tanh=stub_any,
        relu=stub_any,
        backward=stub,
        exercise=2,
    )
    assert engine == Engine()
    assert (
        "the package's (exercise 2: not attempted yet)" in capsys.readouterr().out
    )


def test_the_engine_judges_operations_with_chapter_1s_checks(capsys):
    """your_engine takes chapter 1's own checks (value_nodes.check_add, ...):
    a wrong operation of the reader's is replaced by the package's."""
    from backprop_lessons.exercises import value_nodes

    for name in topological_sort.OPERATIONS:
        assert callable(getattr(value_nodes, f"check_{name}"))
    swapped = lambda a, b: Value(a.data * b.data, "", (a, b), (a.data, b.data))  # noqa: E731
    engine = topological_sort.your_engine(
        add=my_add, mul=swapped, tanh=my_tanh, relu=my_relu,
        backward=Value.backward, exercise=2,
    )  # fmt: skip
    assert engine.add is my_add and engine.mul is Value.__mul__
    printed = capsys.readouterr().out.splitlines()
    line = printed.index(
        "  <lambda>     the package's (chapter 1's check: not yet)"
    )
    # why, under it: the hint chapter 1's check gives, wrapped and indented
    reason = printed[line + 1]
    assert reason.startswith(" " * 15) and reason.strip()
    assert all(len(text) <= WIDTH for text in printed)
