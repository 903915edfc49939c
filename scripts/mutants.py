"""The mutation test of the chapters' solutions: `make mutants [CH=04]`.

    python scripts/mutants.py [CH ...] [--max-per-exercise N] [--timeout S]
                              [--out DIR] [--kernel NAME] [--list]

CH names a chapter as `make chapter` reads it ("04", "4", "04_matmul") or
is a notebook's path; without one, every numbered chapter runs.

Every solution cell of a chapter (tagged `solution`) ends in
`assert_correct(check, answer, exercise=N)`.  For each one this makes wrong
versions of the solution's code from its syntax tree (the operators are
below), runs the exercise's check on each of them, quietly, and counts it

    rejected    the check's verdict is anything but "correct", or the mutant
                raised (its code, or the check on it), or it ran past the
                time limit (a hang counts as rejected, and is named so)
    equivalent  "correct", and listed in scripts/mutants_equivalent.toml
                as computing the same thing as the solution (with a reason)
    survived    "correct", and not listed: the check let a wrong version
                through (or the mutant is equivalent and belongs in the list)

The chapter runs headless, top to bottom, in a fresh kernel, through the
grader's runner (`backprop_lessons.grade`, whose channel
`exercises.checking.record_verdicts` also counts the verdicts); right
before each solution cell a cell of ours runs the mutants in a copy of the
notebook's namespace, each under a time limit, and then the solution cell
itself runs, so later cells see the book's state.  The original solution is
run through the same path first: it must be "correct".

The mutation operators (each a change of one node of the tree):

    += made =              an augmented assignment made a plain one
    operator swapped       + and -, * and /, ** made *, // made / (also in
                           +=, -=, *=, /=; @ is kept)
    operands swapped       a - b, a / b, a @ b, a ** b ... with their
                           operands exchanged (+ and * are commutative for
                           numbers, so their swaps are not made)
    term dropped           a term of a sum or a difference, a factor of a
                           product, a divisor
    constant changed       an int n made n + 1 (and n - 1 when n > 0), a
                           float x made x / 2 and x + 1, True and False
                           exchanged
    comparison flipped     < made <= and >, == made !=, in made not in, ...
    unary dropped          -x made x, not x made x
    index or axis changed  a constant in an index or an axis= / dim=
                           changed, an element of an axis tuple dropped,
                           axis= or keepdims= dropped, an array index
                           dropped, a transpose (.T, .mT, swapaxes)
                           dropped
    arguments swapped      two neighbouring positional arguments of a call
    statement dropped      a call or an augmented assignment made `pass`
    function swapped       a reduction or collective made its sibling: sum
                           and mean, max and min, all_gather and all_reduce

A mutant may run for --timeout seconds (60), or 20 times as long as the
solution's own check when that is longer.  An exercise with more mutants
than --max-per-exercise (150) runs a deterministic sample of them (seeded
by chapter and exercise).  The figures go to the terminal, per chapter and
exercise, with every survivor's change, and to DIR (default
_build/mutants): NN.json per chapter run, and results.json and results.md
over every chapter whose NN.json is there.  The exit status is 1 when a
survivor remains or a solution fails its own check.

It is slow (each chapter runs whole, and each check once per mutant), so it
is not part of `make test`; chapters 8 and 12 start processes and chapter 9
needs about 5 GB: `make mutants` runs the chapters one at a time.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import contextlib
import copy
import io
import json
import linecache
import random
import signal
import sys
import tempfile
import time
import tomllib
import traceback
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
EQUIVALENTS = ROOT / "scripts" / "mutants_equivalent.toml"
OUT = ROOT / "_build" / "mutants"
MAX_PER_EXERCISE = 150
TIMEOUT = 60  # seconds per mutant, at least (see `_limit`)
CELL_TIMEOUT = 3600  # seconds per notebook cell (the mutants' cell is long)

REJECTED, EQUIVALENT, SURVIVED = "rejected", "equivalent", "survived"
CORRECT, RAISED, TIMED_OUT = "correct", "raised", "timed out"


# ---- the mutants of a solution cell (standard library only) ------------------


def split_solution(source: str) -> tuple[ast.Module, str]:
    """The solution's code (the cell's statements before its closing
    `assert_correct(check, *answers, **kw)`) as a tree, and that call made
    the check's own, `check(*answers, **kw)`, as source."""
    tree = ast.parse(source)
    last = tree.body[-1] if tree.body else None
    call = last.value if isinstance(last, ast.Expr) else None
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "assert_correct"
        and call.args
    ):
        raise ValueError(
            "a solution cell ends in assert_correct(check, answer, exercise=N)"
        )
    check = ast.Call(
        func=call.args[0], args=call.args[1:], keywords=call.keywords
    )
    code = ast.Module(body=tree.body[:-1], type_ignores=[])
    return code, ast.unparse(check)


def _code(source: str) -> str:
    """The cell's lines before its closing assert_correct."""
    code, _ = split_solution(source)
    end = code.body[-1].end_lineno if code.body else 0
    return "\n".join(source.splitlines()[:end])


def exercise_number(source: str) -> int:
    """N of the closing `assert_correct(..., exercise=N)`."""
    tree = ast.parse(source)
    for keyword in tree.body[-1].value.keywords:
        if keyword.arg == "exercise":
            return keyword.value.value
    raise ValueError("the solution's assert_correct has no exercise=N")


_BINARY_SWAPS = {
    ast.Add: [ast.Sub],
    ast.Sub: [ast.Add],
    ast.Mult: [ast.Div],
    ast.Div: [ast.Mult],
    ast.FloorDiv: [ast.Div],
    ast.Pow: [ast.Mult],
}
_NOT_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.MatMult, ast.Pow)
_COMPARISON_FLIPS = {
    ast.Lt: [ast.LtE, ast.Gt],
    ast.LtE: [ast.Lt, ast.GtE],
    ast.Gt: [ast.GtE, ast.Lt],
    ast.GtE: [ast.Gt, ast.LtE],
    ast.Eq: [ast.NotEq],
    ast.NotEq: [ast.Eq],
    ast.Is: [ast.IsNot],
    ast.IsNot: [ast.Is],
    ast.In: [ast.NotIn],
    ast.NotIn: [ast.In],
}
_AXIS = {"axis", "axes", "dim"}
_KEEPDIMS = {"keepdims", "keepdim"}
_TRANSPOSES = {"swapaxes", "transpose", "permute"}  # methods; .T is _transposed
#: a function called where its sibling was meant (a reduction, a collective)
_SIBLINGS = {
    "sum": "mean",
    "mean": "sum",
    "max": "min",
    "min": "max",
    "maximum": "minimum",
    "minimum": "maximum",
    "amax": "amin",
    "all_reduce": "all_gather",
    "all_gather": "all_reduce",
    "reduce_scatter": "all_reduce",
}


def _precedence(node: ast.AST) -> int:
    """How tightly `node` binds (Python's operator precedence): a
    replacement binding more loosely than what it replaces is
    parenthesized."""
    if isinstance(node, ast.BinOp):
        return {
            ast.BitOr: 6,
            ast.BitXor: 7,
            ast.BitAnd: 8,
            ast.LShift: 9,
            ast.RShift: 9,
            ast.Add: 10,
            ast.Sub: 10,
            ast.Pow: 13,
        }.get(type(node.op), 11)
    if isinstance(node, ast.UnaryOp):
        return 4 if isinstance(node.op, ast.Not) else 12
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return 12 if node.value < 0 else 15
    kinds = {ast.Compare: 5, ast.BoolOp: 3, ast.IfExp: 1, ast.Lambda: 0}
    kinds |= {ast.NamedExpr: -1, ast.Await: 14, ast.Tuple: 0}
    return next((p for k, p in kinds.items() if isinstance(node, k)), 15)


def _numbers(value) -> list:
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1] + ([value - 1] if value > 0 else [])
    if isinstance(value, float):
        return ([value / 2] if value else []) + [value + 1]
    return []


def _in_index(parents: list[ast.AST], node: ast.AST) -> bool:
    """Is `node` inside an index (a subscript's slice) or an axis= / dim=
    keyword?"""
    chain = [*parents, node]
    for outer, inner in zip(chain, chain[1:]):
        if isinstance(outer, ast.Subscript) and inner is outer.slice:
            return True
        if isinstance(outer, ast.keyword) and outer.arg in _AXIS:
            return True
    return False


def _array_index(node: ast.AST) -> bool:
    """An array's index (worth dropping), not a dict's key or a string's."""
    if not isinstance(node, ast.Subscript):
        return False
    part = node.slice
    return not (isinstance(part, ast.Constant) and isinstance(part.value, str))


def _transposed(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr in {"T", "mT"}


def _without_keyword(call: ast.Call, keyword: ast.keyword) -> ast.Call:
    new = copy.copy(call)
    new.keywords = [k for k in call.keywords if k is not keyword]
    return new


def _changes(node: ast.AST, parents: list[ast.AST]):
    """(operator, replacement node) for every mutant of `node` itself."""
    if isinstance(node, ast.AugAssign | ast.Expr):
        yield "statement dropped", ast.Pass()
    if isinstance(node, ast.AugAssign):
        sign = type(node.op)
        name = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
        if sign in name:
            yield (
                f"{name[sign]}= made =",
                ast.Assign(targets=[node.target], value=node.value, lineno=0),
            )
        for other in _BINARY_SWAPS.get(sign, []):
            yield (
                "operator swapped",
                ast.AugAssign(node.target, other(), node.value),
            )
    elif isinstance(node, ast.BinOp):
        for other in _BINARY_SWAPS.get(type(node.op), []):
            yield "operator swapped", ast.BinOp(node.left, other(), node.right)
        if isinstance(node.op, _NOT_COMMUTATIVE):
            yield "operands swapped", ast.BinOp(node.right, node.op, node.left)
        if isinstance(node.op, ast.Add | ast.Mult):
            yield "term dropped", node.left
            yield "term dropped", node.right
        elif isinstance(node.op, ast.Sub):
            yield "term dropped", node.left
            yield "term dropped", ast.UnaryOp(ast.USub(), node.right)
        elif isinstance(node.op, ast.Div):
            yield "term dropped", node.left
    elif isinstance(node, ast.UnaryOp) and isinstance(
        node.op, ast.USub | ast.Not
    ):
        yield "unary dropped", node.operand
    elif isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            for other in _COMPARISON_FLIPS.get(type(op), []):
                ops = [*node.ops[:i], other(), *node.ops[i + 1 :]]
                yield (
                    "comparison flipped",
                    ast.Compare(node.left, ops, node.comparators),
                )
    elif isinstance(node, ast.Constant):
        for number in _numbers(node.value):
            yield "constant changed", ast.Constant(number)
    elif isinstance(node, ast.Call):
        yield from _call_changes(node)
    elif _array_index(node) or _transposed(node):
        yield "index or axis changed", node.value


def _call_changes(node: ast.Call):
    args = node.args
    for i in range(len(args) - 1):
        if not isinstance(args[i], ast.Starred | ast.GeneratorExp) and not (
            isinstance(args[i + 1], ast.Starred)
        ):
            swapped = [*args[:i], args[i + 1], args[i], *args[i + 2 :]]
            yield "arguments swapped", ast.Call(node.func, swapped, node.keywords)
    for keyword in node.keywords:
        if keyword.arg in _KEEPDIMS or keyword.arg in _AXIS:
            yield "index or axis changed", _without_keyword(node, keyword)
        if keyword.arg in _AXIS and isinstance(keyword.value, ast.Tuple):
            for element in keyword.value.elts:
                rest = [e for e in keyword.value.elts if e is not element]
                value = ast.Tuple(rest, ast.Load()) if len(rest) > 1 else rest[0]
                new = copy.copy(node)
                new.keywords = [
                    ast.keyword(k.arg, value) if k is keyword else k
                    for k in node.keywords
                ]
                yield "index or axis changed", new
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in _TRANSPOSES:
        yield "index or axis changed", func.value
    name = getattr(func, "id", getattr(func, "attr", None))
    builtin = isinstance(func, ast.Name) and hasattr(builtins, name)
    if name in _SIBLINGS and not (
        builtin and not hasattr(builtins, _SIBLINGS[name])
    ):
        other = copy.copy(func)
        if isinstance(func, ast.Name):
            other.id = _SIBLINGS[name]
        else:
            other.attr = _SIBLINGS[name]
        yield "function swapped", ast.Call(other, node.args, node.keywords)


def _walk(node: ast.AST, parents: list[ast.AST]):
    """(node, its parents) below `node`, leaving out docstrings, imports
    and decorators."""
    for name, value in ast.iter_fields(node):
        if name == "decorator_list":
            continue
        children = value if isinstance(value, list) else [value]
        for i, child in enumerate(children):
            if not isinstance(child, ast.AST):
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                continue
            if (
                name == "body"
                and i == 0
                and isinstance(node, ast.FunctionDef | ast.ClassDef)
                and isinstance(child, ast.Expr)
                and isinstance(child.value, ast.Constant)
            ):
                continue  # a docstring
            yield child, parents
            yield from _walk(child, [*parents, child])


@contextlib.contextmanager
def _put(parent: ast.AST, old: ast.AST, new: ast.AST):
    """`new` in `parent` where `old` is, for the duration."""
    for name, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, name, new)
            try:
                yield
            finally:
                setattr(parent, name, old)
            return
        if isinstance(value, list) and any(v is old for v in value):
            i = next(k for k, v in enumerate(value) if v is old)
            value[i] = new
            try:
                yield
            finally:
                value[i] = old
            return
    raise LookupError("the node is not a child of its parent")


def _replacement(node: ast.AST, new: ast.AST, parents: list[ast.AST]):
    """The node whose source span is replaced (`node`, or the outermost
    f-string around it: positions inside f-strings are not reliable before
    Python 3.12) and its new source."""
    outer = next((p for p in parents if isinstance(p, ast.JoinedStr)), None)
    if outer is None:
        text = ast.unparse(new)
        if isinstance(node, ast.expr) and _precedence(new) < _precedence(node):
            text = f"({text})"
        return node, text
    with _put(parents[-1] if parents else outer, node, new):
        return outer, ast.unparse(outer)


def _spliced(lines: list[bytes], node: ast.AST, text: str) -> list[bytes]:
    """`lines` (UTF-8, as the tree's byte offsets count) with `node`'s span
    replaced by `text`."""
    first, last = node.lineno - 1, node.end_lineno - 1
    head = lines[first][: node.col_offset]
    tail = lines[last][node.end_col_offset :]
    return [*lines[:first], head + text.encode() + tail, *lines[last + 1 :]]


def _normal(lines) -> str:
    return " ".join(" ".join(line.split()) for line in lines)


def mutants(source: str) -> list[dict]:
    """Every mutant of the solution cell `source`: its operator, the line it
    changes (1-based), the changed lines before and after (whitespace made
    single spaces: the key of mutants_equivalent.toml) and the mutated code
    (the cell without its closing assert_correct).  Two operators making
    the same code make one mutant."""
    code, _ = split_solution(source)
    lines = [line.encode() for line in _code(source).splitlines()]
    found, seen = [], {_code(source)}
    for node, parents in _walk(code, []):
        index = _in_index(parents, node)
        for operator, new in _changes(node, parents):
            if index and operator != "arguments swapped":
                operator = "index or axis changed"
            where, text = _replacement(node, new, parents)
            changed = _spliced(lines, where, text)
            mutated = "\n".join(line.decode() for line in changed)
            if mutated in seen:
                continue
            try:
                compile(mutated, "<mutant>", "exec")
            except SyntaxError:
                continue
            seen.add(mutated)
            first, last = where.lineno - 1, where.end_lineno - 1
            found.append(
                {
                    "operator": operator,
                    "line": where.lineno,
                    "before": _normal(
                        line.decode() for line in lines[first : last + 1]
                    ),
                    "after": _normal([changed[first].decode()]),
                    "code": mutated,
                }
            )
    return found


def sample(found: list[dict], cap: int, seed: str) -> list[dict]:
    """At most `cap` of `found`, chosen by a generator seeded with `seed`,
    in their order."""
    if len(found) <= cap:
        return found
    keep = sorted(random.Random(seed).sample(range(len(found)), cap))
    return [found[i] for i in keep]


# ---- the known equivalent mutants -------------------------------------------


def read_equivalents(path: Path = EQUIVALENTS) -> list[dict]:
    """The entries of mutants_equivalent.toml: chapter ("01"), exercise,
    before, after (the changed line, as `mutants` reports it) and reason."""
    entries = tomllib.loads(path.read_text(encoding="utf-8")).get(
        "equivalent", []
    )
    for entry in entries:
        missing = {"chapter", "exercise", "before", "after", "reason"} - set(
            entry
        )
        if missing or not str(entry.get("reason", "")).strip():
            raise ValueError(
                f"{path.name}: an entry needs chapter, exercise, before, after "
                f"and a reason: {entry}"
            )
        entry["before"], entry["after"] = (
            _normal([entry["before"]]),
            _normal([entry["after"]]),
        )
    return entries


def _equivalent_to(
    entries: list[dict], chapter: str, exercise: int, mutant: dict
):
    for entry in entries:
        if (
            entry["chapter"] == chapter
            and entry["exercise"] == exercise
            and entry["before"] == mutant["before"]
            and entry["after"] == mutant["after"]
        ):
            return entry
    return None


# ---- in the kernel: run the mutants of one solution -------------------------


class _TimedOut(BaseException):
    """A mutant ran past its time limit (a BaseException: the checks'
    `except Exception` must not take it for the reader's error)."""


def _alarm(signum, frame):
    raise _TimedOut


def _try(user_ns: dict, code: str, check: str, name: str, limit: float) -> dict:
    """Run `code` in a copy of the notebook's namespace, then the check on
    it, quietly, within `limit` seconds: its verdict, or what it raised."""
    namespace = dict(user_ns)
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    start = time.monotonic()
    quiet = contextlib.ExitStack()
    try:
        with quiet:
            quiet.enter_context(contextlib.redirect_stdout(io.StringIO()))
            quiet.enter_context(contextlib.redirect_stderr(io.StringIO()))
            quiet.enter_context(warnings.catch_warnings())
            warnings.simplefilter("ignore")
            if "numpy" in sys.modules:
                quiet.enter_context(sys.modules["numpy"].errstate(all="ignore"))
            exec(compile(code, name, "exec"), namespace)
            verdict = eval(compile(check, name, "eval"), namespace)
    except _TimedOut:
        return {"status": TIMED_OUT, "hint": f"ran past {limit:.0f} s"}
    except Exception as error:
        text = f"{type(error).__name__}: {error}"
        return {
            "status": RAISED,
            "hint": " ".join(text.split())[:300],
            "in_check": _raised_in_check(error, name),
        }
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        linecache.cache.pop(name, None)
    return {
        "status": getattr(verdict, "status", repr(verdict)),
        "hint": " ".join(str(getattr(verdict, "hint", "")).split())[:300],
        "seconds": round(time.monotonic() - start, 3),
    }


def _raised_in_check(error: BaseException, name: str) -> bool:
    """Did `error` come out of the check's own code (a package module of
    `exercises`), rather than the mutant's (a check should turn whatever
    the reader's code does into a verdict, not raise)?"""
    package = sys.modules.get("backprop_lessons.exercises")
    folder = str(Path(package.__file__).parent) if package else None
    last = None
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename == name:
            last = "mutant"
        elif folder and frame.filename.startswith(folder):
            last = "check"
    return last == "check"


def _limit(timeout: float, original_seconds: float) -> float:
    """A mutant's time limit: `timeout`, or 20 times the original check's
    time when that is longer."""
    return max(timeout, 20 * original_seconds)


def run_job(user_ns: dict, job_file: str, out_file: str) -> None:
    """In the notebook's kernel, right before a solution cell: run the job's
    original solution and then each of its mutants, and write what each did
    to `out_file` (JSON)."""
    job = json.loads(Path(job_file).read_text(encoding="utf-8"))
    name = f"<mutants of {job['chapter']} exercise {job['exercise']}>"
    original = _try(
        user_ns, job["original"], job["check"], name, 10 * CELL_TIMEOUT
    )
    results = {"original": original, "mutants": []}
    if original["status"] == CORRECT:
        limit = _limit(job["timeout"], original["seconds"])
        for mutant in job["mutants"]:
            results["mutants"].append(
                _try(user_ns, mutant["code"], job["check"], name, limit)
            )
    Path(out_file).write_text(json.dumps(results), encoding="utf-8")


# ---- the driver: a chapter run with the mutants' cells -----------------------

_LOAD = """\
import importlib.util, sys
_spec = importlib.util.spec_from_file_location("_backprop_mutants", {path!r})
_backprop_mutants = importlib.util.module_from_spec(_spec)
sys.modules["_backprop_mutants"] = _backprop_mutants
_spec.loader.exec_module(_backprop_mutants)
"""
_RUN = "_backprop_mutants.run_job(globals(), {job!r}, {out!r})\n"


def _notebook(ch: str) -> Path:
    """The chapter `ch` names as `make chapter` reads it ("04", "4",
    "04_matmul"), or a notebook's path."""
    if ch.endswith(".ipynb"):
        return Path(ch).resolve()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from chapter import notebook  # scripts/chapter.py: make chapter's CH

    return notebook(ch)


def _chapter_key(path: Path) -> str:
    return path.stem.split("_")[0]


def run_chapter(path: Path, args, equivalents: list[dict]) -> dict:
    """Run the notebook at `path` with every solution's mutants: the
    chapter's figures and every mutant's outcome."""
    import nbformat

    from backprop_lessons import grade

    chapter = _chapter_key(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nb = nbformat.read(path, as_version=4)
    work = Path(tempfile.mkdtemp(prefix=f"mutants-{chapter}-"))
    cells = [nbformat.v4.new_code_cell(_LOAD.format(path=str(Path(__file__))))]
    jobs = {}  # the index of a mutants' cell in the run -> its job
    for cell in nb.cells:
        if grade.is_solution(cell):
            source = grade.cell_source(cell)
            exercise = exercise_number(source)
            _, check = split_solution(source)
            found = mutants(source)
            chosen = sample(found, args.max_per_exercise, f"{chapter}:{exercise}")
            job = {
                "chapter": chapter,
                "exercise": exercise,
                "check": check,
                "original": _code(source),
                "timeout": args.timeout,
                "mutants": chosen,
                "made": len(found),
            }
            job_file, out_file = (
                work / f"job-{exercise}.json",
                work / f"out-{exercise}.json",
            )
            job_file.write_text(json.dumps(job), encoding="utf-8")
            # the run's cell 0 is the grader's record of verdicts
            jobs[len(cells) + 1] = (job, out_file)
            cells.append(
                nbformat.v4.new_code_cell(
                    _RUN.format(job=str(job_file), out=str(out_file))
                )
            )
        cells.append(cell)
    start = time.monotonic()
    run = grade._run(
        cells, nb.metadata, path.parent.resolve(), CELL_TIMEOUT, args.kernel
    )
    seconds = time.monotonic() - start
    problems = []
    if run.died_in is not None:
        problems.append(f"the kernel died in cell {run.died_in} of the run")
    if run.broke:
        problems.append(run.broke)
    for k, error in sorted(run.errors.items()):
        source = cells[k - 1].source.strip().splitlines() if k else ["(record)"]
        problems.append(
            f"cell {k} of the run ({source[0][:60]!r}) raised "
            f"{error.get('ename')}: {error.get('evalue', '')[:200]}"
        )
    exercises = {}
    for k, (job, out_file) in jobs.items():
        exercises[str(job["exercise"])] = _outcome(
            chapter, job, out_file, run.verdicts.get(k, []), equivalents, problems
        )
    return {
        "chapter": chapter,
        "notebook": path.name,
        "seconds": round(seconds, 1),
        "max_per_exercise": args.max_per_exercise,
        "problems": problems,
        "exercises": exercises,
    }


def _outcome(chapter, job, out_file, recorded, equivalents, problems) -> dict:
    """One exercise's mutants with their verdicts, each classified."""
    exercise = job["exercise"]
    if not out_file.exists():
        problems.append(f"exercise {exercise}: its mutants did not run")
        return {"made": job["made"], "run": 0, "mutants": [], "original": None}
    out = json.loads(out_file.read_text(encoding="utf-8"))
    if out["original"]["status"] != CORRECT:
        original = out["original"]
        problems.append(
            f"exercise {exercise}: the solution itself is not correct under "
            f"the mutants' runner: {original['status']}: {original['hint']}"
        )
    verdicts = sum(
        r["status"] not in (RAISED, TIMED_OUT)
        for r in [out["original"], *out["mutants"]]
    )
    counted = sum(v.get("exercise") == exercise for v in recorded)
    if counted < verdicts:  # the grader's channel saw fewer verdicts
        problems.append(
            f"exercise {exercise}: {verdicts} verdicts, but the grader's record "
            f"holds {counted}"
        )
    rows = []
    for mutant, result in zip(job["mutants"], out["mutants"]):
        row = {k: mutant[k] for k in ("operator", "line", "before", "after")}
        row |= {"verdict": result["status"], "hint": result["hint"]}
        if result.get("in_check"):
            row["in_check"] = True
        if result["status"] != CORRECT:
            row["outcome"] = REJECTED
        elif entry := _equivalent_to(equivalents, chapter, exercise, mutant):
            row["outcome"], row["reason"] = EQUIVALENT, entry["reason"]
        else:
            row["outcome"] = SURVIVED
        rows.append(row)
    return {
        "made": job["made"],
        "run": len(rows),
        "original_seconds": out["original"].get("seconds"),
        "mutants": rows,
    }


# ---- what it says -------------------------------------------------------------


def figures(exercise: dict) -> dict:
    rows = exercise["mutants"]
    count = {
        k: sum(r["outcome"] == k for r in rows)
        for k in (REJECTED, EQUIVALENT, SURVIVED)
    }
    count["timed out"] = sum(r["verdict"] == TIMED_OUT for r in rows)
    count["raised"] = sum(r["verdict"] == RAISED for r in rows)
    count["in check"] = sum(bool(r.get("in_check")) for r in rows)
    return {"made": exercise["made"], "run": exercise["run"], **count}


def _total(items) -> dict:
    total = {}
    for item in items:
        for key, value in item.items():
            total[key] = total.get(key, 0) + value
    return total


def _notes(f: dict) -> str:
    """How many rejected mutants raised (of them, in the check's own code)
    and ran past the time limit."""
    notes = [f"{f['raised']} raised"] if f["raised"] else []
    if f["in check"]:
        notes[-1] += f", {f['in check']} of them in the check"
    notes += [f"{f['timed out']} timed out"] if f["timed out"] else []
    return ", ".join(notes)


def _row(label: str, f: dict) -> str:
    run = f"{f['run']}" + (f" of {f['made']}" if f["made"] != f["run"] else "")
    rejected = f"{f[REJECTED]}"
    if notes := _notes(f):
        rejected += f" ({notes})"
    return f"| {label} | {run} | {rejected} | {f[EQUIVALENT]} | {f[SURVIVED]} |"


def markdown(results: dict) -> str:
    """The results of every chapter as markdown: a table of the figures
    per chapter and exercise, then every survivor and every equivalent
    mutant with its change, and the mutants on which a check raised."""
    lines = [
        "# Mutants of the solutions",
        "",
        "| chapter / exercise | mutants run | rejected | equivalent | survived |",
        "|---|---|---|---|---|",
    ]
    chapters = results["chapters"]
    for key in sorted(chapters):
        chapter = chapters[key]
        per = {n: figures(e) for n, e in chapter["exercises"].items()}
        lines.append(
            _row(
                f"**{chapter['notebook']}** ({chapter['seconds']:.0f} s)",
                _total(per.values()),
            )
        )
        lines += [
            _row(f"exercise {n}", f)
            for n, f in sorted(per.items(), key=lambda x: int(x[0]))
        ]
    every = [
        figures(e) for c in chapters.values() for e in c["exercises"].values()
    ]
    if every:
        lines.append(_row("**all**", _total(every)))
    sections = (
        ("Survivors", lambda r: r["outcome"] == SURVIVED),
        ("Equivalent", lambda r: r["outcome"] == EQUIVALENT),
        ("Rejected, but the check raised", lambda r: r.get("in_check")),
    )
    for title, chosen in sections:
        found = [
            (key, n, r)
            for key in sorted(chapters)
            for n, e in sorted(
                chapters[key]["exercises"].items(), key=lambda x: int(x[0])
            )
            for r in e["mutants"]
            if chosen(r)
        ]
        lines += ["", f"## {title} ({len(found)})", ""]
        for key, n, r in found:
            why = r.get("reason") or (r["hint"] if r.get("in_check") else "")
            why = f": {why}" if why else ""
            lines += [
                f"- chapter {key}, exercise {n}, {r['operator']} "
                f"(line {r['line']}){why}",
                "  ```diff",
                f"  - {r['before']}",
                f"  + {r['after']}",
                "  ```",
            ]
    problems = [
        (key, p) for key in sorted(chapters) for p in chapters[key]["problems"]
    ]
    if problems:
        lines += ["", "## Problems", ""]
        lines += [f"- chapter {key}: {p}" for key, p in problems]
    return "\n".join(lines) + "\n"


def _print_chapter(result: dict) -> None:
    print(f"{result['notebook']}: ran in {result['seconds']:.0f} s")
    for n, exercise in sorted(
        result["exercises"].items(), key=lambda x: int(x[0])
    ):
        f = figures(exercise)
        made = f"{f['run']}" + (
            f" (a sample of {f['made']})" if f["made"] != f["run"] else ""
        )
        notes = _notes(f)
        print(
            f"  exercise {n}: {made} mutants, {f[REJECTED]} rejected"
            + (f" ({notes})" if notes else "")
            + f", {f[EQUIVALENT]} equivalent, {f[SURVIVED]} survived"
        )
        for r in exercise["mutants"]:
            if r["outcome"] == SURVIVED:
                print(f"    survivor, {r['operator']} (line {r['line']}):")
                print(f"      - {r['before']}\n      + {r['after']}")
            elif r["verdict"] == TIMED_OUT:
                print(f"    timed out (rejected), line {r['line']}: {r['after']}")
            elif r.get("in_check"):
                print(
                    f"    the check raised (rejected, but a check should give "
                    f"a verdict), line {r['line']}:\n      + {r['after']}\n"
                    f"      {r['hint']}"
                )
    for problem in result["problems"]:
        print(f"  PROBLEM: {problem}")


def _stale(
    results: dict, equivalents: list[dict], chapters: set[str]
) -> list[dict]:
    """The entries of the equivalents' file that no mutant of a fully run
    exercise of `chapters` matched as a surviving equivalent."""
    stale = []
    for entry in equivalents:
        chapter = results["chapters"].get(entry["chapter"])
        if entry["chapter"] not in chapters or chapter is None:
            continue
        exercise = chapter["exercises"].get(str(entry["exercise"]))
        if exercise is None or exercise["run"] != exercise["made"]:
            continue
        if not any(
            r["outcome"] == EQUIVALENT
            and (r["before"], r["after"]) == (entry["before"], entry["after"])
            for r in exercise["mutants"]
        ):
            stale.append(entry)
    return stale


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/mutants.py",
        description="Mutation test of the chapters' solution cells.",
    )
    parser.add_argument(
        "chapters",
        nargs="*",
        metavar="CH",
        help="chapters as make chapter names them (default: all)",
    )
    parser.add_argument("--max-per-exercise", type=int, default=MAX_PER_EXERCISE)
    parser.add_argument(
        "--timeout",
        type=float,
        default=TIMEOUT,
        help="seconds a mutant may run, at least (default %(default)s)",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--kernel", default="python3")
    parser.add_argument(
        "--list",
        action="store_true",
        help="only list the mutants each solution cell makes",
    )
    args = parser.parse_args(argv)
    paths = (
        [_notebook(ch) for ch in args.chapters]
        if args.chapters
        else sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    )
    equivalents = read_equivalents()
    if args.list:
        return _list(paths)
    args.out.mkdir(parents=True, exist_ok=True)
    start, failed = time.monotonic(), False
    for path in paths:
        result = run_chapter(path, args, equivalents)
        (args.out / f"{result['chapter']}.json").write_text(
            json.dumps(result, indent=1) + "\n", encoding="utf-8"
        )
        _print_chapter(result)
        failed |= bool(result["problems"]) or any(
            r["outcome"] == SURVIVED
            for e in result["exercises"].values()
            for r in e["mutants"]
        )
    results = {"chapters": {}}
    for file in sorted(args.out.glob("[0-9][0-9].json")):
        chapter = json.loads(file.read_text(encoding="utf-8"))
        results["chapters"][chapter["chapter"]] = chapter
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "results.md").write_text(markdown(results), encoding="utf-8")
    for entry in _stale(results, equivalents, {_chapter_key(p) for p in paths}):
        print(
            f"note: {EQUIVALENTS.name} lists chapter {entry['chapter']} exercise "
            f"{entry['exercise']}'s {entry['before']!r} -> {entry['after']!r}, "
            "which no surviving mutant matched"
        )
    print(
        f"mutants: {time.monotonic() - start:.0f} s; results in "
        f"{args.out / 'results.md'} and results.json"
    )
    return int(failed)


def _list(paths) -> int:
    from backprop_lessons import grade

    for path in paths:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for cell in cells:
            if grade.is_solution(cell):
                source = grade.cell_source(cell)
                found, n = mutants(source), exercise_number(source)
                print(f"{path.stem} exercise {n}: {len(found)} mutants")
                for m in found:
                    print(f"  {m['operator']:22} {m['line']:>3}: {m['after']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
