"""Turn the benchmark results into the files the performance appendix includes.

Reads every benchmarks/results/*.json written by the benchmark scripts
(scalar_engine.py, tensor_engine.py, gpt_step.py; a missing one is
skipped, an unknown one gets a plain key/value table) and writes, next to
them:
    <name>.md       a Markdown table of that benchmark's figures
    speedups.png    one bar chart of every comparison, as reference time /
                    our time (above 1: ours is faster), log scale
    machine.md      the machine and software the figures come from

How to run (after the benchmarks; `make bench` does both):
    .venv/bin/python benchmarks/report.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

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


def ms(seconds) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.3f}" if seconds < 0.01 else f"{seconds * 1e3:.1f}"


# ---- one function per benchmark: (markdown, bars) -----------------------------------
# A bar is (label, reference seconds / our seconds, group).

def scalar_engine(data: dict):
    rows, bars = [], []
    for name, case in data["cases"].items():
        o, m = case["ours"], case["micrograd"]
        speedup = case.get("speedup")
        rows.append([f"{name} ({case['nodes']:,} nodes)", ms(o["fwd_s"]), ms(o["bwd_s"]),
                     ms(m["fwd_s"]), m.get("error") or ms(m["bwd_s"]),
                     "-" if speedup is None else f"{speedup:.1f}x"])
        if speedup is not None:
            bars.append((f"scalar: {name}", speedup, "scalar engine vs micrograd"))
    md = table(["case", "ours forward (ms)", "ours backward (ms)", "micrograd forward (ms)",
                "micrograd backward (ms)", "speed-up (micrograd / ours)"], rows)
    python = data.get("python") or (data.get("machine") or {}).get("python")
    md += (f"\nBest of {next(iter(data['cases'].values()))['repeats']} runs"
           + (f", Python {python}" if python else "")
           + f", micrograd {data.get('micrograd', '0.1.0')}, garbage collector enabled.\n")
    return md, bars


def tensor_engine(data: dict):
    rows, bars, configs = [], [], {}
    for r in data["rows"]:
        sizes = "-".join(map(str, r["sizes"]))
        configs[r["config"]] = f"batch {r['batch']}, layers {sizes}"
        counts = r["thread_counts"]
        rows.append([r["config"], r["dtype"], f"{r['setting']} ({counts['numpy_blas']}/{counts['torch']})",
                     ms(r["engine_s"]), ms(r["torch_s"]), f"{r['ratio']:.2f}",
                     f"{r['cpu_ratio']:.2f}", f"{r['max_rel_diff']['grad']:.0e}"])
        setting = r["setting"].replace("1", "1 thread", 1).replace("default", "default threads")
        bars.append((f"tensor: {r['config']} {r['dtype']}, {setting}",
                     1 / r["ratio"], "Tensor engine vs PyTorch"))
    # Kept narrow enough for the book's text column: the MLPs are named here
    # and described below the table.
    md = table(["MLP", "dtype", "threads", "engine ms", "torch ms", "ratio", "CPU ratio",
                "grad diff"], rows, "lllrrrrr")
    md += "\n" + "; ".join(f"**{k}**: {v}" for k, v in configs.items()) + ".  "
    md += ("*threads*: the setting and the thread counts (NumPy's BLAS / torch); "
           "*ratio*: engine time / PyTorch time (wall clock; *CPU ratio* the same for "
           "processor time); *grad diff*: the largest relative difference of any gradient.  ")
    md += (f"Time per training step (forward, backward, SGD update), best of "
           f"{data['repeats']} alternating turns.  Ratio below 1: the engine is faster.\n")
    return md, bars


def gpt_step(data: dict):
    c, rows, bars = data["config"], [], []
    for r in data["rows"]:
        counts, best, peak = r["thread_counts"], r["best_s"], r["peak_bytes"]
        setting = "1 thread" if r["setting"] == "1" else f"{r['setting']} threads"
        rows.append([f"{r['setting']} ({counts['numpy_blas']}/{counts['torch']})",
                     ms(best["numpy"]), ms(best["torch"]), f"{r['ratio_best']:.2f}",
                     f"{r['ratio_median']:.2f}", f"{peak['numpy'] / 2**20:.1f}",
                     f"{peak['torch'] / 2**20:.1f}"])
        bars.append((f"GPT training step, {setting}", 1 / r["ratio_best"],
                     "hand-written GPT vs PyTorch"))
    md = table(["threads", "NumPy ms", "PyTorch ms", "ratio", "median ratio",
                "NumPy peak MB", "PyTorch peak MB"], rows, "lrrrrrr")
    check = {v["dtype"]: v for v in data["rows"][0]["validation"]}
    f32, f64 = check.get("float32", {}), check.get("float64", {})
    md += (f"\nOne training step (forward, backward, AdamW update) of a GPT with "
           f"{c['n_layer']} layers, {c['n_head']} heads, {c['n_embd']} channels, vocabulary "
           f"{c['vocab_size']}, B={c['batch_size']}, T={c['seq_len']}, {c.get('dtype', 'float32')}. "
           "*threads*: the setting and the thread counts (NumPy's BLAS / torch); "
           f"*NumPy ms*, *PyTorch ms*: the fastest of {data.get('repeats', '?')} steps taken in "
           "alternation; *ratio*: NumPy time / PyTorch time of those fastest steps (below 1: the "
           "hand-written step is faster), *median ratio* the same for the medians; "
           "*peak MB*: the most memory the step allocated on top of what existed before it "
           "(NumPy: traced by `tracemalloc`; PyTorch: tensor storage from its CPU allocator, "
           "read from the profiler).  Checked before timing: after one step the loss, every "
           "gradient and every updated parameter agree with PyTorch (largest relative "
           f"gradient difference {f32.get('grad_max_rel_diff', float('nan')):.0e} in float32, "
           f"{f64.get('grad_max_rel_diff', float('nan')):.0e} in float64).\n")
    return md, bars


def generic(data: dict):
    rows = [[k, json.dumps(v)[:80]] for k, v in data.items() if k != "machine"]
    return table(["key", "value"], rows, "ll"), []


HANDLERS = {"scalar_engine": scalar_engine, "tensor_engine": tensor_engine,
            "gpt_step": gpt_step}


# ---- the chart and the machine ------------------------------------------------------

def chart(bars: list, path: Path) -> None:
    colors = {"scalar engine vs micrograd": "#4C72B0", "Tensor engine vs PyTorch": "#DD8452",
              "hand-written GPT vs PyTorch": "#55A868"}
    order = list(colors)
    bars = sorted(bars, key=lambda b: order.index(b[2]) if b[2] in order else len(order))
    bars = bars[::-1]  # matplotlib draws the first bar at the bottom
    fig, ax = plt.subplots(figsize=(8, 0.38 * len(bars) + 1.6))
    ax.barh(range(len(bars)), [b[1] for b in bars],
            color=[colors.get(b[2], "gray") for b in bars])
    ax.set_yticks(range(len(bars)), [b[0] for b in bars], fontsize=8)
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=1)
    for i, (_, value, _) in enumerate(bars):
        ax.text(value * 1.04, i, f"{value:.2f}x", va="center", fontsize=7)
    ax.set_xlim(min(0.5, min(b[1] for b in bars) / 1.3), max(2.0, max(b[1] for b in bars) * 1.5))
    ticks = [t for t in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100)
             if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.set_xlabel("reference time / our time (log scale; right of 1: ours is faster)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for g, c in colors.items()
               if any(b[2] == g for b in bars)]
    ax.legend(handles, [g for g in colors if any(b[2] == g for b in bars)],
              loc="lower right", fontsize=8)
    ax.set_title("Speed of the book's engines relative to a reference implementation")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def machine_md(results: dict) -> str:
    """The machine of the Tensor benchmark run if there is one, else of this run."""
    info = dict(results.get("tensor_engine", {}).get("machine") or machine_info())
    live = machine_info()
    for key, value in live.items():  # fill in what an older JSON lacks
        info.setdefault(key, value)
    blas = info.get("numpy_blas") or {}
    threads = info.get("threads_per_setting") or {}
    thread_text = "; ".join(f"{s}: NumPy {c['numpy_blas']}, torch {c['torch']}"
                            for s, c in threads.items()) or (
        f"NumPy {info.get('numpy_blas_threads')}, torch {info.get('torch_threads')}")
    rows = [
        ["CPU", f"{info.get('cpu_model')} ({info.get('machine')})"],
        ["cores", f"{info.get('physical_cores')} physical, {info.get('logical_cpus')} logical"],
        ["memory", f"{info.get('memory_gib')} GiB"],
        ["operating system", info.get("os")],
        ["Python", info.get("python")],
        ["NumPy", f"{info.get('numpy')}, BLAS: {blas.get('name', '?')} {blas.get('version', '')}"
                  + (f" ({blas['kernel']} kernels)" if blas.get("kernel") else "")],
        ["PyTorch", f"{info.get('torch')} (CPU), BLAS: {info.get('torch_blas')}"],
        ["threads per setting", thread_text],
        ["load average at the run (1, 5, 15 min)",
         ", ".join(map(str, info.get("load_average") or [])) or "-"],
        ["date of the run", info.get("date")],
    ]
    return table(["", ""], rows, "ll").replace("|  |  |\n", "| item | value |\n", 1)


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
    (RESULTS / "machine.md").write_text(machine_md(results))
    print("wrote machine.md")
    if bars:
        chart(bars, RESULTS / "speedups.png")
        print("wrote speedups.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
