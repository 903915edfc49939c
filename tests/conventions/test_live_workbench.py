"""Where the reader types: every stored notebook as Colab and JupyterLab
show it (issue 36, "the live workbench").

The rendered book hides solutions itself (book/_ext/reading.py; the browser
tests check it).  A notebook opened in Colab or JupyterLab shows what the
file holds:

- Colab shows every code cell's source except a form cell's (metadata
  `cellView: "form"` and a first line `# @title ...`, of which it shows the
  title), and every stored output, whatever the cell's metadata says;
- JupyterLab shows every source and output but those its `jupyter`
  metadata hides (`source_hidden`, `outputs_hidden`).

So, over every notebook:

- a solution is a form cell with its source and outputs hidden, and it
  prints nothing: it ends in `assert_correct(check, ..., exercise=N)`, so
  nbval proves it and a reader's Run All shows no verdict under it;
- no self-check's answer or explanation is in a cell: the cell names a
  question of the package's tables (`widgets.self_check`);
- no stored output prints the book's version of a backward the reader
  writes (it is behind `reveal_source`, in the widget's state);
- Run All leaves the reader's work in place: no cell defines a name that
  an exercise's stub defines;
- every exercise that asks for a backward (chapters 4-6, and chapter 1's
  operations) has its ladder of three hints, the idea, the shapes (for a
  scalar: what each input receives) and the formula, before its solution;
- links open readable pages: a page of the book by its published address
  (the book's build makes it local), another chapter by its `.ipynb`.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
import yaml

from backprop_lessons import grade
from backprop_lessons.exercises import questions

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
PUBLISHED = CONFIG["html"]["baseurl"]
EXERCISE = re.compile(r"^### Exercise (\d+)", re.M)
NOT_ATTEMPTED = "not attempted yet"


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _tags(cell: dict) -> set[str]:
    return set(cell["metadata"].get("tags", []))


def _output_texts(cell: dict) -> list[str]:
    """Every text a stored output holds (streams, text/plain, HTML)."""
    texts = []
    for out in cell.get("outputs", []):
        if "text" in out:
            texts.append("".join(out["text"]))
        for mime, value in out.get("data", {}).items():
            if mime.startswith("text/"):
                texts.append("".join(value))
    return texts


def _is_stub(cell: dict) -> bool:
    return (
        cell["cell_type"] == "code"
        and "solution" not in _tags(cell)
        and any(NOT_ATTEMPTED in t for t in _output_texts(cell))
    )


def _exercises(path: Path):
    """(exercise number, stub cell index, solution cell index) of every
    exercise of the notebook."""
    cells, found, number, stub = _cells(path), [], None, None
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "markdown" and EXERCISE.search(_source(cell)):
            number, stub = int(EXERCISE.findall(_source(cell))[-1]), None
        elif _is_stub(cell):
            stub = i
        elif cell["cell_type"] == "code" and "solution" in _tags(cell):
            found.append((number, stub, i))
    return found


def test_every_chapter_with_exercises_has_stubs_and_solutions():
    found = {p.stem: _exercises(p) for p in NOTEBOOKS}
    assert sum(len(e) for e in found.values()) >= 40, found
    for name, exercises in found.items():
        for number, stub, solution in exercises:
            assert number is not None and stub is not None, (
                f"{name}: the solution in cell {solution} follows no "
                "'### Exercise N' heading and stub"
            )


# ---- solutions: hidden in Colab and JupyterLab, printing nothing ------------

COLAB_TITLE = re.compile(r"\A# @title Exercise (\d+): a solution\n")
#: the solution's proof: assert_correct(check_x, ..., exercise=N), which
#: prints nothing (a verdict under a collapsed solution, after Run All, sat
#: right under the reader's "not attempted yet")
ASSERTED = re.compile(r"^assert_correct\([^#]*?\bexercise=(\d+)\)$", re.M | re.S)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_solutions_are_hidden_where_the_reader_types(path):
    cells = _cells(path)
    bad = []
    for number, _, i in _exercises(path):
        cell = cells[i]
        meta, source = cell["metadata"], _source(cell)
        title = COLAB_TITLE.match(source)
        if meta.get("cellView") != "form" or not title:
            bad.append(
                (
                    i,
                    "a Colab form cell: cellView 'form' and a first "
                    f"line '# @title Exercise {number}: a solution'",
                )
            )
        elif int(title[1]) != number:
            bad.append((i, f"its title names exercise {title[1]}"))
        if meta.get("jupyter") != {"source_hidden": True, "outputs_hidden": True}:
            bad.append((i, "jupyter: source_hidden and outputs_hidden true"))
        if cell.get("outputs"):
            bad.append((i, "no output (it asserts its check quietly)"))
        proofs = [int(n) for n in ASSERTED.findall(source)]
        if proofs != [number]:
            bad.append((i, f"one assert_correct(check, ..., exercise={number})"))
    assert not bad, f"{path.name}: solution cells (cell, expected): {bad}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_solution_prints_no_line_of_its_code(path):
    """What Colab shows of a solution, its stored output, gives none of its
    code away."""
    cells = _cells(path)
    leaks = []
    for _, _, i in _exercises(path):
        code = {
            line.strip()
            for line in _source(cells[i]).splitlines()[1:]
            if len(line.strip()) > 12 and not line.strip().startswith("#")
        }
        for text in _output_texts(cells[i]):
            leaks += [(i, line) for line in code if line in text]
    assert not leaks, f"{path.name}: solution code in stored outputs: {leaks}"


# ---- self-checks: the answers stay in the package -----------------------------

SELF_CHECK_CALL = re.compile(r'^self_check\("(\w+)", "([\w-]+)"\)$', re.M)
WIDGET_BUILT_HERE = re.compile(
    r"\b(NumberCheck|ChoiceCheck)\(|\banswer=|\bexplanation="
)


def _all_questions() -> dict[tuple[str, str], questions.Question]:
    import importlib
    import pkgutil

    import backprop_lessons.exercises as exercises

    found = {}
    for info in pkgutil.iter_modules(exercises.__path__):
        module = importlib.import_module(
            f"backprop_lessons.exercises.{info.name}"
        )
        for key, question in getattr(module, "SELF_CHECKS", {}).items():
            found[(info.name, key)] = question
    return found


def test_every_question_builds_its_widget():
    from backprop_lessons.widgets import self_check

    table = _all_questions()
    assert len(table) >= 26
    for topic, key in table:
        widget = self_check(topic, key)
        assert widget.question, (topic, key)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_self_checks_name_their_question_and_hold_no_answer(path):
    table = _all_questions()
    cells = _cells(path)
    named, bad = [], []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        source = _source(cell)
        if WIDGET_BUILT_HERE.search(source):
            bad.append((i, "builds a self-check in the open"))
        for topic, key in SELF_CHECK_CALL.findall(source):
            if (topic, key) not in table:
                bad.append((i, f"no question {topic}/{key} in the package"))
            named.append((topic, key))
    assert len(named) >= 2, f"{path.name}: at least two self-checks"
    # nothing of a question's explanation in a code cell or an output (the
    # chapter's prose may state the fact; a cell must not hand it over)
    in_view = "\n".join(
        _source(c) + "\n".join(_output_texts(c))
        for c in cells
        if c["cell_type"] == "code"
    )
    for topic, key in named:
        q = table.get((topic, key))
        explanation = q.kwargs.get("explanation", "") if q else ""
        if explanation and explanation[:40] in in_view:
            bad.append((key, "its explanation is in a cell or an output"))
    assert not bad, f"{path.name}: (cell, problem) {bad}"


# ---- the book's version of a backward the reader writes -----------------------

#: The package functions whose code a reader writes in an exercise before
#: seeing them: chapter 1's operations of the scalar engine, chapter 2's
#: topological order and backward loop, chapter 4's matmul VJP and
#: unbroadcast, chapter 5's backward and batch norm's, every layer backward
#: of chapter 6 and the whole model's.
WRITTEN_BY_THE_READER = [
    "backprop_lessons.scalar.Value.__add__",
    "backprop_lessons.scalar.Value.__mul__",
    "backprop_lessons.scalar.Value.__pow__",
    "backprop_lessons.scalar.Value.exp",
    "backprop_lessons.scalar.Value.tanh",
    "backprop_lessons.scalar.Value.relu",
    "backprop_lessons.scalar.Value.backward",
    "backprop_lessons.graph_order.topological_order",
    "backprop_lessons.tensor.Tensor.matmul_backward",
    "backprop_lessons.tensor.unbroadcast",
    "backprop_lessons.mlp3.ThreeLayerMLP.backward",
    "backprop_lessons.gpt.layers.batchnorm_backward",
    "backprop_lessons.gpt.layers.matmul_backward",
    "backprop_lessons.gpt.layers.gelu_backward",
    "backprop_lessons.gpt.layers.crossentropy_softmax_backward",
    "backprop_lessons.gpt.layers.layernorm_backward",
    "backprop_lessons.gpt.layers.encoder_backward",
    "backprop_lessons.gpt.layers.attention_backward",
    "backprop_lessons.gpt.model.gpt_backward",
    "backprop_lessons.gpt.layers.flash_attention_backward",
    "backprop_lessons.gpt.layers.fused_classifier_backward",
    "backprop_lessons.scale.collectives.ReduceScatter",
]


def test_the_books_version_is_behind_a_click():
    """Each is shown with reveal_source (its code in the widget's state, not
    in an output), and no stored output prints it."""
    revealed, printed = set(), []
    for path in NOTEBOOKS:
        cells = _cells(path)
        for i, cell in enumerate(cells):
            for text in _output_texts(cell):
                for name in WRITTEN_BY_THE_READER:
                    if text.startswith(f"SourceReveal({name})"):
                        revealed.add(name)
                    elif f"# {name}\n" in text or f"{name}</div>" in text:
                        printed.append((path.name, i, name))
    assert not printed, f"the book's backward printed in an output: {printed}"
    assert revealed == set(WRITTEN_BY_THE_READER), (
        f"not behind reveal_source: {set(WRITTEN_BY_THE_READER) - revealed}"
    )


# ---- Run All leaves the reader's work in place --------------------------------


def _defined(source: str) -> set[str]:
    """The names a cell binds at its top level (def, class, =, for, import):
    the grader's reading of a cell, which the student edition uses too."""
    return grade.bound_names(source)


def _readers_names(source: str) -> set[str]:
    """What the reader writes in a stub: its functions and classes, and the
    names it asks to fill in (assigned a value holding `...`)."""
    tree = ast.parse(source)
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign) and any(
            isinstance(n, ast.Constant) and n.value is Ellipsis
            for n in ast.walk(node.value)
        ):
            for t in node.targets:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_cell_redefines_what_a_stub_defines(path):
    cells = _cells(path)
    stubs = {
        i: _readers_names(_source(c)) for i, c in enumerate(cells) if _is_stub(c)
    }
    clashes = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        defined = _defined(_source(cell))
        for j, names in stubs.items():
            if j != i and defined & names:
                clashes.append((i, j, sorted(defined & names)))
    assert not clashes, (
        f"{path.name}: (cell, stub cell, names) {clashes}: Run All would "
        "replace the reader's code; name the solution apart (..._solution)"
    )


def test_the_names_test_sees_a_clash():
    assert _readers_names("def f(x):\n    raise NotImplementedError\n") == {"f"}
    assert _readers_names('a = {"x": ...}\nb = 3\n') == {"a"}
    assert "f" in _defined("def f(x):\n    return x\n")
    assert {"a", "np"} <= _defined("import numpy as np\nfor a in []:\n    pass\n")


# ---- the ladder of hints -------------------------------------------------------

#: The exercises that ask for a backward: chapter 1's six operations (each
#: a node with its local derivatives), chapter 2's backward loop, chapter
#: 4's exercise 1, chapter 5's MLP, batch norm and input gradient, and all
#: eight of chapter 6.
BACKWARD_EXERCISES = {
    "01_value_nodes": [1, 2, 3, 4, 5, 6],
    "02_topological_sort": [2],
    "04_matmul_vjp": [1],
    "05_mlp_by_hand": [1, 2, 4],
    "06_gpt_backward": [1, 2, 3, 4, 5, 6, 7, 8],
    "10_memory_and_precision": [1, 2],
    "12_model_parallel": [1, 2, 3, 6, 8, 9],
}
HINT = re.compile(r'<details class="hint"><summary>(Hint[^<]*)</summary>')
LADDER = ["Hint 1: the idea", "Hint 2: the shapes", "Hint 3: the formula"]
#: on scalars there are no shapes: Hint 2 says what each input receives
SCALAR_LADDER = [LADDER[0], "Hint 2: what each input receives", LADDER[2]]
SCALAR_CHAPTERS = {"01_value_nodes", "02_topological_sort"}


@pytest.mark.parametrize("name", BACKWARD_EXERCISES)
def test_backward_exercises_have_a_ladder_of_hints(name):
    path = ROOT / "notebooks" / f"{name}.ipynb"
    cells = _cells(path)
    exercises = {n: (stub, sol) for n, stub, sol in _exercises(path)}
    for number in BACKWARD_EXERCISES[name]:
        stub, solution = exercises[number]
        between = "\n".join(
            _source(c)
            for c in cells[stub + 1 : solution]
            if c["cell_type"] == "markdown"
        )
        ladder = SCALAR_LADDER if name in SCALAR_CHAPTERS else LADDER
        assert HINT.findall(between) == ladder, (
            f"{name}, exercise {number}: between the stub and the solution, "
            f"hints {HINT.findall(between)}; expected {ladder}"
        )


# ---- links that open readable pages -------------------------------------------

LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_links_open_readable_pages(path):
    """JupyterLab and Colab show a book page (MyST) as raw text: a notebook
    links to it by its published address, which the book's build turns
    into a local link; another chapter by its .ipynb, which both open."""
    bad = []
    for i, cell in enumerate(_cells(path)):
        if cell["cell_type"] != "markdown":
            continue
        for target in LINK.findall(_source(cell)):
            page = target.partition("#")[0]
            if page.startswith(PUBLISHED):
                doc = page[len(PUBLISHED) :].removesuffix(".html")
                if (
                    not (ROOT / f"{doc}.md").exists()
                    and not (ROOT / f"{doc}.ipynb").exists()
                ):
                    bad.append((i, target, "no such page in the book"))
            elif page.startswith(("http://", "https://", "mailto:")):
                continue
            elif page.endswith(".ipynb"):
                if not (path.parent / page).exists():
                    bad.append((i, target, "no such notebook"))
            elif page:
                bad.append((i, target, "link a page by its published address"))
    assert not bad, f"{path.name}: links (cell, target, problem): {bad}"
