"""The private PyTorch APIs the package calls (all in torch_private) still
exist: after a PyTorch upgrade this fails first, naming what is gone.  No
other module imports a private torch module or reads a private attribute
of a PyTorch object (both found from the syntax tree)."""

from __future__ import annotations

import ast
from pathlib import Path

import torch

from backprop_lessons import torch_private

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "backprop_lessons"
PRIVATE = (
    "torch._C",
    "_get_zeros_like_grad_buckets",
    "kineto_results",
    "experimental_event_tree",
)


def test_the_private_apis_are_still_there():
    gone = torch_private.missing()
    assert not gone, (
        f"PyTorch {torch.__version__} lacks private APIs that "
        f"backprop_lessons/torch_private.py (written against "
        f"{torch_private.WRITTEN_AGAINST}) calls: {', '.join(gone)}; "
        f"update that module"
    )


def _private_imports(source: str) -> list[str]:
    """The private torch modules a file imports: a part of the dotted name
    after `torch` starts with an underscore (torch._C, torch.utils._pytree)."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return [
        n
        for n in names
        if n.split(".")[0] == "torch"
        and any(part.startswith("_") for part in n.split(".")[1:])
    ]


def test_only_torch_private_calls_private_apis():
    callers = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if any(name in path.read_text() for name in PRIVATE)
        or _private_imports(path.read_text())
    )
    assert callers == ["torch_private.py"]


def test_the_check_sees_private_modules():
    assert _private_imports("from torch.utils._python_dispatch import X") == [
        "torch.utils._python_dispatch"
    ]
    assert _private_imports("import torch._C._profiler as p") == [
        "torch._C._profiler"
    ]
    assert not _private_imports("from torch.autograd.profiler import profile")


# ---- private attributes, read from the syntax tree ---------------------------


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (
        name.startswith("__") and name.endswith("__")
    )


def own_names(trees) -> set[str]:
    """Every name the package itself defines: functions, classes, variables,
    arguments, keywords, import aliases, and attributes it sets on `self` or
    `cls`.  A private attribute the package reads under any other name
    belongs to another library's object."""
    names = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(
                node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            ):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif (
                isinstance(node, ast.arg)
                or isinstance(node, ast.keyword)
                and node.arg
            ):
                names.add(node.arg)
            elif isinstance(node, ast.alias):
                names.add((node.asname or node.name).split(".")[0])
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("self", "cls")
            ):
                names.add(node.attr)
    return names


#: documented, public functions of the standard library whose names begin
#: with an underscore
STDLIB_PUBLIC = {"os._exit"}


def foreign_private_attributes(tree, own: set[str]) -> list[str]:
    """`x._name` where the package defines no `_name` (PyTorch's object,
    read or written: `func._schema`, `sched._num_stages = ...`), and
    `X.__new__` on a name a torch import bound (an object made without its
    constructor)."""
    from_torch = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            from_torch |= {
                (a.asname or a.name).split(".")[0]
                for a in node.names
                if a.name.split(".")[0] == "torch"
            }
        elif (
            isinstance(node, ast.ImportFrom)
            and (node.module or "").split(".")[0] == "torch"
        ):
            from_torch |= {a.asname or a.name for a in node.names}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        root = node.value
        while isinstance(root, ast.Attribute):
            root = root.value
        torch_bound = isinstance(root, ast.Name) and root.id in from_torch
        if ast.unparse(node) in STDLIB_PUBLIC:
            continue
        if (_is_private(node.attr) and node.attr not in own) or (
            node.attr == "__new__" and torch_bound
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_only_torch_private_reaches_into_torch_objects():
    """pipeline's schedule timetable and traced's operator schema went
    through private attributes outside torch_private, where the probe did
    not see them (issue 45)."""
    trees = {p: ast.parse(p.read_text()) for p in sorted(PACKAGE.rglob("*.py"))}
    own = own_names(trees.values())
    found = [
        f"{path.relative_to(PACKAGE)}:{hit}"
        for path, tree in trees.items()
        if path.name != "torch_private.py"
        for hit in foreign_private_attributes(tree, own)
    ]
    assert not found, f"move these into torch_private.py: {found}"


def test_the_attribute_check_sees_reads_writes_and_constructors():
    source = (
        "from torch.distributed.pipelining import schedules as S\n"
        "import torch\n"
        "def f(func, node, kind):\n"
        "    sched = S.ScheduleGPipe.__new__(S.ScheduleGPipe)\n"
        "    sched._n_microbatches = 4\n"
        "    node._children, func._schema.arguments\n"
        "    torch.Tensor.__new__, kind.__new__\n"
        "    os._exit(0)\n"
    )
    hits = foreign_private_attributes(ast.parse(source), {"_children"})
    assert sorted(h.split(": ")[1] for h in hits) == [
        "S.ScheduleGPipe.__new__",
        "func._schema",
        "sched._n_microbatches",
        "torch.Tensor.__new__",
    ]


def test_the_probe_runs_the_schedule_timetable_and_the_schema():
    from torch.distributed.pipelining import schedules as S

    grid = torch_private.schedule_timetable(S.ScheduleZBVZeroBubble, 2, 4)
    assert len(grid) == 2
    assert str(grid[0][0]) == "0F0"  # rank 0 starts stage 0's first forward
    written = [
        a.name
        for a in torch_private.schema_arguments(torch.ops.aten.add_.Tensor)
        if a.alias_info is not None and a.alias_info.is_write
    ]
    assert written == ["self"]


def test_the_adapter_reads_allocations():
    from torch.autograd import profiler

    with profiler.profile(profile_memory=True) as prof:
        torch.ones(1000, dtype=torch.float64)
    sizes = [size for _, _, size in torch_private.cpu_allocations(prof)]
    assert 8000 in sizes
    assert isinstance(ast.literal_eval(repr(torch_private.WRITTEN_AGAINST)), str)
