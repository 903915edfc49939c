"""backprop_lessons.traced: PyTorch's own forward and backward graphs
(AOTAutograd)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from backprop_lessons.traced import torch_backward_graphs  # noqa: E402


def wx_b_squared(W, x, b):
    return ((W @ x + b) ** 2).sum()


@pytest.fixture(scope="module")
def graphs():
    W = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    x = torch.tensor([1.0, -1.0], dtype=torch.float64)
    b = torch.tensor([0.5, -0.5], dtype=torch.float64)
    return torch_backward_graphs(wx_b_squared, W, x, b)


def test_forward_graph_is_the_function(graphs):
    lines = graphs.forward.splitlines()
    assert lines[3:7] == [
        "mv = mv(primals_1, primals_2)",
        "add = add(mv, primals_3)",
        "pow_1 = pow(add, 2)",
        "sum_1 = sum(pow_1)",
    ]
    assert lines[-1] == "return [sum_1, primals_1, primals_2, add]"


def test_backward_graph_saves_w_x_and_the_residual(graphs):
    assert graphs.saved == ("primals_1", "primals_2", "add")
    ops = [
        line.split(" = ")[1].split("(")[0]
        for line in graphs.backward.splitlines()
        if " = " in line
    ]
    assert "t" in ops and ops.count("mv") == 1 and "mul" in ops
    assert graphs.backward.splitlines()[-1].startswith("return [")


def test_text_fits_the_page(graphs):
    assert all(len(line) <= 82 for line in str(graphs).splitlines())
    assert str(graphs).startswith("forward graph\n")


def test_the_traced_backward_computes_the_right_gradients():
    """The graphs are those of a working backward: compare with (Wx + b)^2 by
    hand, dL/db = 2(Wx + b), dL/dW = 2(Wx + b) x^T, dL/dx = W^T 2(Wx + b)."""
    from functorch.compile import aot_function, make_boxed_func

    W = torch.tensor(
        [[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64, requires_grad=True
    )
    x = torch.tensor([1.0, -1.0], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([0.5, -0.5], dtype=torch.float64, requires_grad=True)

    def boxed(gm, _):
        return make_boxed_func(gm.forward)

    aot_function(wx_b_squared, fw_compiler=boxed, bw_compiler=boxed)(
        W, x, b
    ).backward()
    r = (W @ x + b).detach()  # [-0.5, -1.5]
    assert torch.equal(b.grad, 2 * r)
    assert torch.equal(W.grad, torch.outer(2 * r, x.detach()))
    assert torch.equal(x.grad, W.detach().T @ (2 * r))


def test_non_scalar_output_is_an_error():
    with pytest.raises(
        ValueError, match="f must return a scalar, got shape \\(2,\\)"
    ):
        torch_backward_graphs(lambda a: a * 2, torch.ones(2))


def test_inplace_ops_are_found_in_order():
    from backprop_lessons.traced import inplace_ops

    def f(x):
        y = torch.sigmoid(x)
        y.mul_(2)  # modifies sigmoid's saved output
        z = torch.relu(y)
        z.add_(1.0)
        torch.nn.functional.relu(z, inplace=True)
        return z.sum()

    assert inplace_ops(f, torch.randn(3, requires_grad=True)) == [
        "mul_",
        "add_",
        "relu_",
    ]


def test_out_of_place_code_has_none_and_out_buffers_do_not_count():
    from backprop_lessons.traced import inplace_ops

    buf = torch.empty(3)
    assert inplace_ops(lambda x: torch.add(x, 1.0, out=buf), torch.ones(3)) == []
    assert inplace_ops(lambda x: (x * x).sum(), torch.ones(3)) == []
