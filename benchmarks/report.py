"""Turn the benchmark results into the files the performance appendix includes.

Reads every benchmarks/results/*.json written by the benchmark scripts
(scalar_engine.py, tensor_engine.py, gpt_step.py, microgpt_step.py; a
missing one is skipped, an unknown one gets a plain key/value table), and
the speed-ups of gpt2_124m/results.json (gpt2_124m.py writes its own table),
and writes, next to them:
    <name>.md       a Markdown table of that benchmark's figures
    speedups.png    one bar chart of every comparison, log scale, each bar
                    starting at 1
    machine.md      the machine and software the figures come from

Every ratio on the page has one direction, the speed-up:

    speed-up = the reference's time / our time    (above 1: ours is faster)

and every table has a column "speed-up" whose note says "<reference> time /
our time (above 1: ...faster)".  To add a benchmark, write a handler
`name(data) -> (markdown, bars)` below, bars being (label, speed-up, group),
and add it to HANDLERS and GROUP_COLORS.

How to run (after the benchmarks; `make bench` does both):
    .venv/bin/python benchmarks/report.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from backprop_lessons.viz import plots

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE))
from machine_info import machine_info  # noqa: E402


def table(head: list[str], rows: list[list], align: str | None = None) -> str:
    """A Markdown pipe table; `align` is one letter per column, l or r."""
    align = align or "l" + "r" * (len(head) - 1)
    rule = ["---:" if a == "r" else ":---" for a in align]
    lines = [head, rule] + [[str(c) for c in row] for row in rows]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines) + "\n"


def speedup(value) -> str:
    """A speed-up as every table writes it: two decimals and a times sign."""
    return "-" if value is None else f"{value:.2f}\u00d7"


def ms(seconds) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.3f}" if seconds < 0.01 else f"{seconds * 1e3:.1f}"


# ---- one function per benchmark: (markdown, bars) ------------------------------
# A bar is (label, speed-up = reference seconds / our seconds, group).


def scalar_engine(data: dict):
    rows, bars = [], []
    for name, case in data["cases"].items():
        o, m = case["ours"], case["micrograd"]
        ratio = case.get("speedup")  # (micrograd forward + backward) / ours
        rows.append(
            [
                f"{name} ({case['nodes']:,} nodes)",
                ms(o["fwd_s"]),
                ms(o["bwd_s"]),
                ms(m["fwd_s"]),
                m.get("error") or ms(m["bwd_s"]),
                speedup(ratio),
            ]
        )
        if ratio is not None:
            bars.append((f"scalar: {name}", ratio, "scalar engine vs micrograd"))
    md = table(
        [
            "case",
            "ours forward (ms)",
            "ours backward (ms)",
            "micrograd forward (ms)",
            "micrograd backward (ms)",
            "speed-up",
        ],
        rows,
    )
    python = data.get("python") or (data.get("machine") or {}).get("python")
    md += (
        f"\nBest of {next(iter(data['cases'].values()))['repeats']} runs"
        + (f", Python {python}" if python else "")
        + f", micrograd {data.get('micrograd', '0.1.0')}, "
        "garbage collector enabled.  "
        "*speed-up*: micrograd time / our time, forward and backward together "
        "(above 1: the book's engine is faster).\n"
    )
    return md, bars


def tensor_engine(data: dict):
    rows, bars, configs = [], [], {}
    for r in data["rows"]:
        sizes = "-".join(map(str, r["sizes"]))
        configs[r["config"]] = f"batch {r['batch']}, layers {sizes}"
        counts = r["thread_counts"]
        # The JSON stores engine time / PyTorch time; the page shows its inverse.
        rows.append(
            [
                r["config"],
                r["dtype"],
                f"{r['setting']} ({counts['numpy_blas']}/{counts['torch']})",
                ms(r["engine_s"]),
                ms(r["torch_s"]),
                speedup(1 / r["ratio"]),
                speedup(1 / r["cpu_ratio"]),
                f"{r['max_rel_diff']['grad']:.0e}",
            ]
        )
        setting = (
            r["setting"]
            .replace("1", "1 thread", 1)
            .replace("default", "default threads")
        )
        bars.append(
            (
                f"tensor: {r['config']} {r['dtype']}, {setting}",
                1 / r["ratio"],
                "Tensor engine vs PyTorch",
            )
        )
    # Kept narrow enough for the book's text column: the MLPs are named here
    # and described below the table.
    md = table(
        [
            "MLP",
            "dtype",
            "threads",
            "ours ms",
            "PyTorch ms",
            "speed-up",
            "CPU speed-up",
            "grad diff",
        ],
        rows,
        "lllrrrrr",
    )
    md += "\n" + "; ".join(f"**{k}**: {v}" for k, v in configs.items()) + ".  "
    md += (
        "*threads*: the setting and the thread counts (NumPy's BLAS / torch); "
        "*speed-up*: PyTorch time / our time (wall clock; "
        "*CPU speed-up* the same for processor time), above 1: the book's engine "
        "is "
        "faster; *grad diff*: the largest relative difference of any gradient.  "
    )
    md += (
        f"Time per training step (forward, backward, SGD update), best of "
        f"{data['repeats']} alternating turns.\n"
    )
    return md, bars


def gpt_step(data: dict):
    """The book's step and the tuned one (benchmarks/gpt_tuned.py), each
    against PyTorch."""
    c, rows, bars = data["config"], [], []
    for r in data["rows"]:
        counts, best, peak = r["thread_counts"], r["best_s"], r["peak_bytes"]
        setting = "1 thread" if r["setting"] == "1" else f"{r['setting']} threads"
        # The JSON stores NumPy time / PyTorch time; the page shows its inverse.
        rows.append(
            [
                f"{r['setting']} ({counts['numpy_blas']}/{counts['torch']})",
                ms(best["numpy"]),
                ms(best["tuned"]),
                ms(best["torch"]),
                speedup(1 / r["ratio_best"]),
                speedup(1 / r["ratio_best_tuned"]),
                speedup(1 / r["ratio_median_tuned"]),
                "/".join(
                    f"{peak[side] / 2**20:.0f}"
                    for side in ("numpy", "tuned", "torch")
                ),
            ]
        )
        for side, suffix in (("book's layers", ""), ("tuned", "_tuned")):
            bars.append(
                (
                    f"GPT training step, {side}, {setting}",
                    1 / r[f"ratio_best{suffix}"],
                    "hand-written GPT vs PyTorch",
                )
            )
    md = table(
        [
            "threads",
            "book ms",
            "tuned ms",
            "PyTorch ms",
            "book speed-up",
            "tuned speed-up",
            "tuned median",
            "peak MB",
        ],
        rows,
        "lrrrrrrr",
    )
    checks = {(v["side"], v["dtype"]): v for v in data["rows"][0]["validation"]}
    worst = {
        dtype: max(
            v["grad_max_rel_diff"] for (_, d), v in checks.items() if d == dtype
        )
        for dtype in ("float32", "float64")
    }
    md += (
        f"\nOne training step (forward, backward, AdamW update) of a GPT with "
        f"{c['n_layer']} layers, {c['n_head']} heads, {c['n_embd']} channels, "
        f"vocabulary {c['vocab_size']}, B={c['batch_size']}, T={c['seq_len']}, "
        f"{c.get('dtype', 'float32')}. "
        "*threads*: the setting and the thread counts (NumPy's BLAS / torch); "
        "*book*: the step of chapter 6's layers; *tuned*: the same step laid out "
        "for speed (`benchmarks/gpt_tuned.py`); *ms*: the fastest of "
        f"{data.get('repeats', '?')} steps taken in alternation; *speed-up*: "
        "PyTorch time / our time of those fastest steps (above 1: the "
        "hand-written step is faster), *tuned median* the same for the "
        "medians; *peak MB* (book / tuned / PyTorch): the most memory the step "
        "allocated on top of what "
        "existed before it (NumPy: traced by `tracemalloc`, and for the tuned "
        "step the buffers it makes once; PyTorch: tensor storage from its CPU "
        "allocator, read from the profiler).  Checked before timing: after one "
        "step the loss, every gradient and every updated parameter of both "
        "NumPy steps agree with PyTorch (largest relative gradient difference "
        f"{worst['float32']:.0e} in float32, {worst['float64']:.0e} in "
        "float64).\n"
    )
    return md, bars


def microgpt_step(data: dict):
    """The same name's step on the scalar engine and on the NumPy twin; no
    bars (both sides are the book's own code)."""
    rows = [
        [
            name,
            f"{t['positions']}",
            ms(t["step"]),
            ms(t["step_gc_on"]),
            ms(t["numpy"]),
            speedup(t["step"] / t["numpy"]),
        ]
        for name, t in data["seconds"].items()
    ]
    md = table(
        [
            "name",
            "positions",
            "scalar ms",
            "scalar, gc on, ms",
            "NumPy twin ms",
            "speed-up of the twin",
        ],
        rows,
        "lrrrrr",
    )
    md += (
        f"\nOne name's forward and backward through microgpt "
        f"({data['parameters']:,} parameters) on the scalar engine "
        "(`backprop_lessons.microgpt`, one `Value` per number, Python's cyclic "
        "collector paused as `microgpt.train` runs it; *gc on*: with the "
        "collector on, its default) and on its NumPy twin "
        "(`microgpt.numpy_twin`, the layer backwards written by hand), one "
        "BLAS thread; the fastest of "
        f"{data['repeats']} turns each.  *speed-up of the twin*: scalar time / "
        "twin time.  Checked before timing: the loss and every gradient agree "
        "to 1e-12.\n"
    )
    return md, []


def gpt2_124m_bars(path: Path) -> list:
    """Bars of benchmarks/gpt2_124m.py (which writes its own table): the NumPy
    step's speed-up over transformers, per thread setting and shape."""
    if not path.exists():
        return []
    bars = []
    for r in json.loads(path.read_text())["rows"]:
        threads, _, extra = r["setting"].partition("+")
        setting = "1 thread" if threads == "1" else f"{threads} threads"
        setting += " + malloc" if extra else ""
        for shape, s in r["shapes"].items():
            label = f"GPT-2 124M, {shape.replace('x', ' x ')}, {setting}"
            speedup = s["speedup"]["transformers"]
            bars.append((label, speedup, "GPT-2 124M vs transformers"))
    return bars


def generic(data: dict):
    rows = [[k, json.dumps(v)[:80]] for k, v in data.items() if k != "machine"]
    return table(["key", "value"], rows, "ll"), []


HANDLERS = {
    "scalar_engine": scalar_engine,
    "tensor_engine": tensor_engine,
    "gpt_step": gpt_step,
    "microgpt_step": microgpt_step,
}


# ---- the chart and the machine -------------------------------------------------

GROUP_COLORS = {
    "scalar engine vs micrograd": plots.SERIES_COLORS[0],
    "Tensor engine vs PyTorch": plots.SERIES_COLORS[1],
    "hand-written GPT vs PyTorch": plots.SERIES_COLORS[2],
    "GPT-2 124M vs transformers": plots.SERIES_COLORS[3],
}


def chart(bars: list, path: Path) -> None:
    """Every speed-up as a bar from 1 on a log axis, grouped by comparison."""
    order = list(GROUP_COLORS)
    bars = sorted(
        bars, key=lambda b: order.index(b[2]) if b[2] in order else len(order)
    )
    fig, ax = plots.figure(height=0.3 * len(bars) + 1.6)
    plots.ratio_bars(
        ax,
        [b[0] for b in bars],
        [b[1] for b in bars],
        colors=[GROUP_COLORS.get(b[2], "gray") for b in bars],
        xlabel="speed-up = reference time / our time (log scale)",
    )
    groups = [g for g in GROUP_COLORS if any(b[2] == g for b in bars)]
    handles = [plt.Rectangle((0, 0), 1, 1, color=GROUP_COLORS[g]) for g in groups]
    fig.legend(handles, groups, loc="outside lower center", ncols=2)
    data, _ = plots.png(fig)
    path.write_bytes(data)
    plt.close(fig)


def machine_md(results: dict) -> str:
    """The machine of the Tensor benchmark run if there is one, else of this
    run."""
    info = dict(results.get("tensor_engine", {}).get("machine") or machine_info())
    live = machine_info()
    for key, value in live.items():  # fill in what an older JSON lacks
        info.setdefault(key, value)
    blas = info.get("numpy_blas") or {}
    threads = info.get("threads_per_setting") or {}
    thread_text = "; ".join(
        f"{s}: NumPy {c['numpy_blas']}, torch {c['torch']}"
        for s, c in threads.items()
    ) or (
        f"NumPy {info.get('numpy_blas_threads')}, torch "
        f"{info.get('torch_threads')}"
    )
    rows = [
        ["CPU", f"{info.get('cpu_model')} ({info.get('machine')})"],
        [
            "cores",
            f"{info.get('physical_cores')} physical, {info.get('logical_cpus')} "
            "logical",
        ],
        ["memory", f"{info.get('memory_gib')} GiB"],
        ["operating system", info.get("os")],
        ["Python", info.get("python")],
        [
            "NumPy",
            f"{info.get('numpy')}, BLAS: {blas.get('name', '?')} "
            f"{blas.get('version', '')}"
            + (f" ({blas['kernel']} kernels)" if blas.get("kernel") else ""),
        ],
        ["PyTorch", f"{info.get('torch')} (CPU), BLAS: {info.get('torch_blas')}"],
        ["threads per setting", thread_text],
        [
            "load average at the run (1, 5, 15 min)",
            ", ".join(map(str, info.get("load_average") or [])) or "-",
        ],
        ["date of the run", info.get("date")],
    ]
    return table(["", ""], rows, "ll").replace(
        "|  |  |\n", "| item | value |\n", 1
    )


def main() -> int:
    files = sorted(RESULTS.glob("*.json"))
    if not files:
        print(f"no results in {RESULTS}; run the benchmarks first")
        return 1
    results, bars = {}, []
    for path in files:
        data = json.loads(path.read_text())
        name = data.get("benchmark", path.stem)
        results[name] = data
        md, new_bars = HANDLERS.get(name, generic)(data)
        (RESULTS / f"{path.stem}.md").write_text(md)
        bars += new_bars
        print(f"wrote {path.stem}.md")
    for name in HANDLERS:
        if name not in results:
            print(f"(no {name}.json: run benchmarks/{name}.py to include it)")
    bars += gpt2_124m_bars(RESULTS / "gpt2_124m" / "results.json")
    (RESULTS / "machine.md").write_text(machine_md(results))
    print("wrote machine.md")
    if bars:
        chart(bars, RESULTS / "speedups.png")
        print("wrote speedups.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
