"""Chapter 2's cost of a closure per node, in seconds, side by side.

What it measures
    Chapter 2's own workload (a layered graph of 64 x 30 multiplies, adds
    and tanhs, then backward) on its two node designs: `ClosureValue`, a
    closure per node in micrograd's style (one reference cycle per node),
    and the package's `Value` (stored local derivatives, no cycles).  The
    code is read from the chapter's notebook (the definitions of its cells
    that define `ClosureValue`, `workload`, `gc_share`, ...), so the
    figures are those of what the page shows.  Per design and turn:
      total    8 workloads with the collector on (its default), seconds
      in_gc    the part of them spent inside the cyclic collector
               (`gc.callbacks`, as the chapter times it)
      gc_off   3 workloads with the collector off
    The designs take turns, R times; each figure is the fastest turn (the
    better estimate on a shared machine).  The chapter's imports run first,
    so that a full collection walks a heap of the page's modules, as in
    its kernel (IPython's own objects aside).  The chapter checks only counts
    (collections, objects examined and freed), which do not depend on the
    machine's speed or load; its text quotes these seconds as measured here.

How to run
    .venv/bin/python benchmarks/gc_cost.py [--repeats R]   (default 5)
    Takes under a minute.  Writes benchmarks/results/gc_cost.json.
"""

from __future__ import annotations

import argparse
import ast
import gc
import json
import math
import re
from pathlib import Path

from backprop_lessons.scalar import Value
from harness import print_table, write_results
from machine_info import machine_info

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "02_topological_sort.ipynb"
RESULTS = Path(__file__).resolve().parent / "results" / "gc_cost.json"
#: what the benchmark takes from the chapter (the cells that define them)
NEEDED = {
    "ClosureValue",
    "topological_order_of_closures",
    "workload",
    "gc_share",
    "seconds_without_gc",
}


def chapter_code() -> dict:
    """Run the chapter's imports (so that the heap a full collection walks
    holds the same modules as the page's kernel) and the definitions of its
    cells that define NEEDED (with the helpers beside them) in a fresh
    namespace; return it."""
    namespace: dict = {}
    found = set()
    for cell in json.loads(NOTEBOOK.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        # IPython's magics (the set-up cell's %pip) are no Python: left out
        source = re.sub(
            r"^(\s*)[%!].*$", r"\1pass", "".join(cell["source"]), flags=re.M
        )
        tree = ast.parse(source)
        defined = {
            node.name
            for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef))
        }
        kinds = (ast.Import, ast.ImportFrom)
        if defined & NEEDED:
            kinds += (ast.FunctionDef, ast.ClassDef)
            found |= defined
        # definitions and imports only: a cell's checks and prints stay on
        # the page
        tree.body = [node for node in tree.body if isinstance(node, kinds)]
        exec(compile(tree, f"<{NOTEBOOK.name}>", "exec"), namespace)
    if NEEDED - found:
        raise SystemExit(f"{NOTEBOOK.name} defines no {sorted(NEEDED - found)}")
    return namespace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    assert gc.isenabled(), "run with the garbage collector in its default state"
    chapter = chapter_code()
    designs = {"closures": chapter["ClosureValue"], "package Value": Value}
    if chapter["workload"](Value) != chapter["workload"](designs["closures"]):
        raise SystemExit("the two designs compute different results")
    best = {name: {"total": math.inf, "in_gc": math.inf} for name in designs}
    for _ in range(args.repeats):
        for name, cls in designs.items():
            m = chapter["gc_share"](cls)
            best[name]["total"] = min(best[name]["total"], m["seconds"])
            best[name]["in_gc"] = min(best[name]["in_gc"], m["in_gc"])
    off = chapter["seconds_without_gc"](list(designs.values()), args.repeats)
    for name, cls in designs.items():
        best[name]["gc_off"] = off[cls]
    c, p = best["closures"], best["package Value"]
    ratios = {k: c[k] / p[k] for k in ("total", "in_gc", "gc_off")}
    print_table(
        ["design", "total (s)", "in the collector (s)", "share", "off (s)"],
        [
            [
                name,
                f"{b['total']:.3f}",
                f"{b['in_gc']:.3f}",
                f"{b['in_gc'] / b['total']:.0%}",
                f"{b['gc_off']:.3f}",
            ]
            for name, b in best.items()
        ]
        + [
            [
                "closures / package",
                f"{ratios['total']:.1f}x",
                f"{ratios['in_gc']:.1f}x",
                "",
                f"{ratios['gc_off']:.1f}x",
            ]
        ],
        left_columns=1,
    )
    write_results(
        RESULTS,
        {
            "machine": machine_info(),
            "repeats": args.repeats,
            "seconds": best,
            "closures_over_package": ratios,
        },
    )


if __name__ == "__main__":
    main()
