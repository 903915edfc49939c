"""GPT-2 small at its real size: one float32 training step of the book's NumPy
GPT, of transformers' GPT2LMHeadModel and of the book's PyTorch twin.

What it measures
    One training step (forward and backward, no optimizer) of GPT-2 small,
    12 layers, 12 heads, C = 768, V = 50257, block 1024 (124,439,808
    parameters), in float32 on the CPU, at B = 4, T = 256 and at B = 1,
    T = 1024, written three times:
      numpy         backprop_lessons.gpt: gpt_forward and gpt_backward, the
                    layer functions of gpt/layers.py that chapter 6 shows,
                    with the LM head, softmax and loss fused
                    (gpt_forward(..., fused=True): fused_classifier_forward,
                    chapter 10), as chapter 9's step runs them
      numpy unfused the same step as chapter 6 runs it (fused=False): the
                    (B, T, V) logits, probabilities and their gradient
                    held; the step before the fused classifier
      transformers  Hugging Face's GPT2LMHeadModel, eager attention, its own
                    loss (labels), loss.backward()
      torch twin    backprop_lessons.gpt.reference.torch_gpt_loss, the
                    book's PyTorch twin, loss.backward()
    All three start from the same weights: a random GPT2LMHeadModel,
    loaded into the book's layout with gpt.load_hf_gpt2.  Dropout is off
    (eval mode): the book's model has none.

    Validation first, nothing is timed if it fails:
      float64, B=1, T=16    compare_with_transformers at the 124M shape: the
                            loss (1e-11) and every gradient (1e-9, relative)
      float32, each shape   the three losses agree to 1e-5 (relative), and
                            NumPy's gradients match transformers' within
                            reference.TRANSFORMERS_TOLERANCES["float32"]

    Figures, per shape:
      model FLOPs   chapter 8's rule (backward_cost.gpt_flops_formula): 6 FLOPs
                    per matmul parameter per token, plus 12 L T C per token for
                    q k^T and att v; the same count for all three sides
      step time     fastest and median of R steps, the sides taking turns
                    (a burst of load slows all of them alike)
      sgemm peak    GFLOP/s of a 4096 x 4096 float32 matmul in NumPy and in
                    torch, measured before the steps and again in every
                    round of the turns; the fastest is the peak
      GFLOP/s       model FLOPs / step time
      MFU           that over the CPU's theoretical float32 peak, derived
                    from its flags and clock (timing.theoretical_peak: the
                    cores the setting uses x 2 FMA units x vector lanes x 2
                    x clock), as PaLM defines MFU
      sgemm util.   model FLOPs / step time over NumPy's measured sgemm
                    peak (the book's side runs on NumPy's BLAS): how close
                    a step comes to this machine's best matrix product,
                    not comparable with published MFU
      peak memory   numpy: tracemalloc's peak during one step; the torch
                    sides: backprop_lessons.debug.measure_memory (the CPU
                    allocator's peak, from the profiler); parameters, and
                    anything made before the step, are not counted
      profile       one more NumPy step with every layer function of
                    gpt/layers.py timed where gpt_forward/gpt_backward call
                    it (the same functions, not a copy); for the matmul
                    layers and attention also the time their FLOPs would
                    take at the sgemm peak; and the step's CPU time in the
                    kernel and its page faults (fresh memory costs a fault
                    per page)
    Ratios: speed-up of NumPy = the other side's time / NumPy's time (above
    1: the book's NumPy step is faster).  Targets (the issue's): sgemm
    utilisation at least 75% at B=4, T=256 and 60% at B=1, T=1024, and a
    NumPy step at most 0.8 times transformers' (a speed-up of at least
    1.25).

BLAS kernels
    NumPy uses OpenBLAS, which picks a kernel for the CPU when it loads; its
    name is read back with threadpoolctl.  On some machines the environment
    sets OPENBLAS_CORETYPE (and OPENBLAS_L2_SIZE), which force an older
    kernel: this benchmark removes both from its workers' environment (and
    says so), to measure against the best kernel the CPU has.  PyTorch uses
    its own BLAS (MKL on x86-64) and oneDNN.  Tests and notebooks never
    change these variables.

Threads and memory
    Each setting runs in a fresh subprocess: 'default' (each library picks
    its thread count, here one per core) or a number (OPENBLAS/OMP/
    MKL_NUM_THREADS and torch.set_num_threads).  NumPy's elementwise work
    runs on one thread either way; only its matrix products use several.
    A setting followed by '+malloc' (e.g. default+malloc) also tells glibc's
    malloc to keep the memory it frees (harness.MALLOC_VARS, as in
    tensor_engine.py), for all three sides alike: it shows what the page
    faults of memory handed back to the OS and taken again cost each side.

How to run
    make bench     or     .venv/bin/python benchmarks/gpt2_124m.py
    Options: --settings default 1 default+malloc (default: default),
    --shapes 4x256 1x1024, --repeats R (default 3).  About 5 minutes per
    setting on 2 cores, and 6 GB of memory.
    Writes benchmarks/results/gpt2_124m/results.json and table.md, which
    the book's performance appendix includes.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import sys
import time
from pathlib import Path

from harness import (
    MALLOC_VARS,
    parse_args_or_run_worker,
    print_table,
    rel_diff,
    run_worker,
    start_threads,
    write_results,
)

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "gpt2_124m"
FORCED_KERNEL_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
SIDES = ("numpy", "numpy unfused", "transformers", "torch twin")
NUMPY_SIDES = ("numpy", "numpy unfused")
PEAK_N = 4096
MFU_TARGETS = {"4x256": 0.75, "1x1024": 0.60}  # sgemm utilisation targets
SPEEDUP_TARGET = 1.25  # transformers' time / NumPy's: NumPy at most 0.8x


# ---- the model and the three sides --------------------------------------------


def make_model(dtype: str = "float32", seed: int = 0):
    """A random GPT2LMHeadModel of GPT-2 small's shape, eval mode (no dropout)."""
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    torch.manual_seed(seed)
    config = transformers.GPT2Config(attn_implementation="eager")
    model = transformers.GPT2LMHeadModel(config).eval()
    return model.double() if dtype == "float64" else model


def make_batch(B: int, T: int, seed: int = 0):
    """Random token ids and targets, each (B, T)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return rng.integers(0, 50257, (B, T)), rng.integers(0, 50257, (B, T))


def make_steps(model, idx, targets) -> tuple[dict, dict]:
    """One step function per side (each returns its loss), and the NumPy side's
    state: its config, params and the gradients of its last step."""
    import numpy as np
    import torch

    from backprop_lessons.gpt import gpt_backward, gpt_forward, load_hf_gpt2
    from backprop_lessons.gpt.reference import torch_gpt_loss

    config, params = load_hf_gpt2(model, dtype=np.float32)
    tp = {k: torch.tensor(a, requires_grad=True) for k, a in params.items()}
    idx_t, targets_t = torch.as_tensor(idx), torch.as_tensor(targets)
    state = {"config": config, "params": params}

    def numpy_step():
        loss, cache = gpt_forward(params, config, idx, targets, fused=True)
        state["grads"] = gpt_backward(params, config, cache)
        return loss

    def numpy_unfused_step():
        loss, cache = gpt_forward(params, config, idx, targets)
        state["grads unfused"] = gpt_backward(params, config, cache)
        return loss

    def transformers_step():
        model.zero_grad(set_to_none=True)
        # shift_labels: the targets as given, not shifted by one inside the
        # loss, so that all three sides compute the same loss
        out = model(input_ids=idx_t, labels=targets_t, shift_labels=targets_t)
        out.loss.backward()
        return out.loss.item()

    def twin_step():
        for t in tp.values():
            t.grad = None
        loss = torch_gpt_loss(tp, config, idx_t, targets_t)
        loss.backward()
        return loss.item()

    steps = {
        "numpy": numpy_step,
        "numpy unfused": numpy_unfused_step,
        "transformers": transformers_step,
        "torch twin": twin_step,
    }
    return steps, state


# ---- validation ---------------------------------------------------------------


def validate_float64() -> dict:
    """compare_with_transformers at the 124M shape in float64, B=1, T=16."""
    from backprop_lessons.gpt.reference import compare_with_transformers

    table = compare_with_transformers(make_model("float64"), *make_batch(1, 16))
    return {
        "ok": table.passed,
        "loss_rel_err": table["loss"].rel_error,
        "worst_grad_rel_err": max(r.rel_error for r in table.rows[2:]),
    }


def validate_float32(model, steps, state) -> dict:
    """One step of each side: the losses agree, and NumPy's gradients match
    transformers' within the float32 tolerances."""
    import numpy as np

    from backprop_lessons.gpt import load_hf_gpt2
    from backprop_lessons.gpt.reference import TRANSFORMERS_TOLERANCES

    losses = {side: step() for side, step in steps.items()}
    ref = {k: p.grad for k, p in model.named_parameters()}
    _, ref = load_hf_gpt2(ref, dtype=np.float32, config=model.config)
    model.zero_grad(set_to_none=True)
    tol = TRANSFORMERS_TOLERANCES["float32"]
    grad_errors = {
        f"{k}{suffix}": rel_diff(g, ref[k])
        for key, suffix in (("grads", ""), ("grads unfused", " (unfused)"))
        for k, g in state[key].items()
    }
    loss_error = max(rel_diff(x, losses["transformers"]) for x in losses.values())
    ok = loss_error <= tol["loss"] and all(
        e <= tol.get(k.split()[0], tol["default"]) for k, e in grad_errors.items()
    )
    worst = max(grad_errors, key=grad_errors.get)
    return {
        "ok": ok,
        "losses": losses,
        "loss_rel_err": loss_error,
        "worst_grad": worst,
        "worst_grad_rel_err": grad_errors[worst],
    }


# ---- peaks, kernels, timing, memory, profile ---------------------------------


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def sgemm_functions(n: int = PEAK_N) -> dict:
    """One n x n float32 matmul each in NumPy and torch, as functions that
    return GFLOP/s (the fastest of `repeats` products)."""
    import numpy as np
    import torch

    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    b = a.T.copy()
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)

    def rate(mm):
        def measure(repeats=2):
            return 2 * n**3 / min(_timed(mm) for _ in range(repeats)) / 1e9

        return measure

    functions = {"numpy": rate(lambda: a @ b), "torch": rate(lambda: ta @ tb)}
    for measure in functions.values():
        measure(1)  # warm-up: threads started, buffers allocated
    return functions


def blas_kernels() -> dict:
    """What each library runs its matrix products on: NumPy's OpenBLAS kernel
    from threadpoolctl, torch's BLAS from its build configuration."""
    import torch
    from threadpoolctl import threadpool_info

    keys = ("internal_api", "version", "architecture", "num_threads")
    openblas = [
        m for m in threadpool_info() if m.get("internal_api") == "openblas"
    ]
    blas = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    return {
        "numpy": {k: openblas[0].get(k) for k in keys} if openblas else None,
        "torch": {
            "blas": blas.group(1) if blas else "unknown",
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "num_threads": torch.get_num_threads(),
        },
    }


def time_steps(steps: dict, peaks: dict, repeats: int) -> dict:
    """Each side's step `repeats` times, the sides taking turns after one
    warm-up each; the sgemm peaks measured before and in every round."""
    peak = {name: measure(5) for name, measure in peaks.items()}
    for step in steps.values():
        step()
    times = {side: [] for side in steps}
    for _ in range(repeats):
        for side, step in steps.items():
            times[side].append(_timed(step))
        peak = {
            name: max(peak[name], measure()) for name, measure in peaks.items()
        }
    return {
        "best_s": {s: min(t) for s, t in times.items()},
        "median_s": {s: statistics.median(t) for s, t in times.items()},
        "all_s": times,
        "sgemm_peak_gflops": peak,
    }


def peak_bytes(steps: dict) -> dict:
    """Memory one step allocates on top of what exists before it, per side."""
    import tracemalloc

    from backprop_lessons.debug import measure_memory

    peaks = {}
    for side in NUMPY_SIDES:
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            steps[side]()
            peaks[side] = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
    for side in SIDES:
        if side not in NUMPY_SIDES:
            peaks[side] = measure_memory(steps[side]).peak_bytes
    return peaks


def layer_profile(step) -> dict:
    """Seconds in each layer function during one call of `step` (the NumPy step),
    and the step's wall time, CPU time in the kernel and page faults.

    The functions are timed where gpt/model.py calls them: each of its names
    is wrapped for the duration of the step, then restored.
    """
    from backprop_lessons.gpt import layers, model

    seconds = {}
    originals = {
        name: getattr(model, name)
        for name in layers.__all__
        if name.endswith(("_forward", "_backward")) and hasattr(model, name)
    }

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - t0

        return wrapper

    for name, fn in originals.items():
        setattr(model, name, timed(name, fn))
    before = resource.getrusage(resource.RUSAGE_SELF)
    try:
        total = _timed(step)
    finally:
        for name, fn in originals.items():
            setattr(model, name, fn)
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "step_s": total,
        "layers_s": seconds,
        "user_cpu_s": after.ru_utime - before.ru_utime,
        "system_cpu_s": after.ru_stime - before.ru_stime,
        "page_faults": after.ru_minflt - before.ru_minflt,
    }


def flops(config, B: int, T: int) -> dict:
    """Model FLOPs of one step (6N + attention): in all, in the matmul layers
    and in attention's products."""
    from backprop_lessons.scale import backward_cost

    total = backward_cost.gpt_flops_formula(config, B, T)["total"]
    matmul_layers = 6 * B * T * backward_cost.gpt_matmul_parameters(config)
    attention = 12 * config.n_layer * B * T * T * config.n_embd
    assert matmul_layers + attention == total
    return {
        "total": total,
        "matmul_layers": matmul_layers,
        "attention": attention,
    }


# ---- the worker ---------------------------------------------------------------


def measure_shape(
    model, B: int, T: int, peaks: dict, repeats: int, theoretical: float
) -> dict:
    """Validation, then timing, profile and memory of one batch shape."""
    idx, targets = make_batch(B, T)
    steps, state = make_steps(model, idx, targets)
    check = validate_float32(model, steps, state)
    print(
        f"  check float32 ({B}x{T}): ok={check['ok']}, losses {check['losses']}, "
        f"worst gradient {check['worst_grad']} {check['worst_grad_rel_err']:.1e}",
        flush=True,
    )
    if not check["ok"]:
        raise SystemExit(f"the three sides disagree at {B}x{T}: not timing")
    timing = time_steps(steps, peaks, repeats)
    profile = layer_profile(steps["numpy"])
    memory = peak_bytes(steps)
    count = flops(state["config"], B, T)
    best, peak = timing["best_s"], timing["sgemm_peak_gflops"]["numpy"] * 1e9
    print(
        f"  {B}x{T}: fastest step numpy {best['numpy']:.2f} s, transformers "
        f"{best['transformers']:.2f} s, twin {best['torch twin']:.2f} s, "
        f"numpy unfused {best['numpy unfused']:.2f} s; "
        f"NumPy sgemm {peak / 1e9:.0f} GFLOP/s",
        flush=True,
    )
    return {
        "B": B,
        "T": T,
        "validation": check,
        "flops": count,
        **timing,
        "profile": profile,
        "peak_bytes": memory,
        "gflops": {s: count["total"] / t / 1e9 for s, t in best.items()},
        "theoretical_peak_gflops": theoretical / 1e9,
        "mfu": {s: count["total"] / t / theoretical for s, t in best.items()},
        "sgemm_util": {s: count["total"] / t / peak for s, t in best.items()},
        "speedup": {s: best[s] / best["numpy"] for s in SIDES[1:]},
    }


def worker(setting: str, repeats: int) -> dict:
    """In a fresh process: the float64 check, then every shape of --shapes."""
    from machine_info import machine_info

    counts = start_threads(setting, setting.partition("+")[0])
    kernels = blas_kernels()
    print(
        f"  NumPy's BLAS: {kernels['numpy']}; torch: {kernels['torch']}",
        flush=True,
    )
    check64 = validate_float64()
    print(
        f"  check float64 (124M, B=1, T=16) vs transformers: ok={check64['ok']}, "
        f"loss {check64['loss_rel_err']:.1e}, worst gradient "
        f"{check64['worst_grad_rel_err']:.1e}",
        flush=True,
    )
    if not check64["ok"]:
        raise SystemExit("the book's GPT and transformers disagree: not timing")
    from backprop_lessons.timing import theoretical_peak

    model, peaks = make_model("float32"), sgemm_functions()
    cores = None if setting.startswith("default") else int(setting.split("+")[0])
    theoretical = theoretical_peak(cores=cores)
    print(f"  theoretical peak: {theoretical}", flush=True)
    shapes = {}
    for shape in os.environ["GPT2_124M_SHAPES"].split():
        B, T = (int(n) for n in shape.split("x"))
        shapes[shape] = measure_shape(
            model, B, T, peaks, repeats, theoretical.flops
        )
    return {
        "setting": setting,
        "thread_counts": counts,
        "kernels": kernels,
        "theoretical_peak": str(theoretical),
        "validation_float64": check64,
        "shapes": shapes,
        "machine": machine_info(),
    }


# ---- tables -------------------------------------------------------------------


def step_rows(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """One row per thread setting, shape and side."""
    head = [
        "threads",
        "B x T",
        "side",
        "step s",
        "median s",
        "GFLOP/s",
        "MFU",
        "sgemm util.",
        "speed-up of NumPy",
        "peak MB",
    ]
    body = []
    for r in rows:
        for shape, s in r["shapes"].items():
            for side in SIDES:
                speedup = "-" if side == "numpy" else f"{s['speedup'][side]:.2f}"
                body.append(
                    [
                        r["setting"],
                        shape.replace("x", " x "),
                        side,
                        f"{s['best_s'][side]:.2f}",
                        f"{s['median_s'][side]:.2f}",
                        f"{s['gflops'][side]:.0f}",
                        f"{s['mfu'][side]:.0%}",
                        f"{s['sgemm_util'][side]:.0%}",
                        speedup,
                        f"{s['peak_bytes'][side] / 2**20:.0f}",
                    ]
                )
    return head, body


PROFILE_GROUPS = {  # rows of the profile: layer functions of gpt/layers.py
    "matmul": ("matmul_forward", "matmul_backward"),
    "attention": ("attention_forward", "attention_backward"),
    "softmax + cross-entropy": (
        "crossentropy_softmax_forward",
        "crossentropy_softmax_backward",
    ),
    "fused classifier": (
        "fused_classifier_forward",
        "fused_classifier_backward",
    ),
    "GELU": ("gelu_forward", "gelu_backward"),
    "layernorm": ("layernorm_forward", "layernorm_backward"),
    "residual, encoder": (
        "residual_forward",
        "residual_backward",
        "encoder_forward",
        "encoder_backward",
    ),
}


def group_seconds(shape: dict, group: str) -> float:
    """Seconds one profiled NumPy step spent in a PROFILE_GROUPS group."""
    layers_s = shape["profile"]["layers_s"]
    return sum(layers_s.get(name, 0.0) for name in PROFILE_GROUPS[group])


def seconds_at_peak(shape: dict) -> dict[str, float]:
    """What the FLOPs of the matmul layers and of attention's products would
    take at NumPy's sgemm peak."""
    peak = shape["sgemm_peak_gflops"]["numpy"] * 1e9
    return {
        "matmul": shape["flops"]["matmul_layers"] / peak,
        "attention": shape["flops"]["attention"] / peak,
    }


def profile_rows(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Seconds per group of layer functions, forward and backward together."""
    head = [
        "threads",
        "B x T",
        "layer functions",
        "s",
        "share of step",
        "s at sgemm peak",
    ]
    body = []
    for r in rows:
        for shape, s in r["shapes"].items():
            prof, at_peak = s["profile"], seconds_at_peak(s)
            where = [r["setting"], shape.replace("x", " x ")]
            for group in PROFILE_GROUPS:
                sec = group_seconds(s, group)
                body.append(
                    where
                    + [
                        group,
                        f"{sec:.2f}",
                        f"{sec / prof['step_s']:.0%}",
                        f"{at_peak[group]:.2f}" if group in at_peak else "-",
                    ]
                )
            rest = prof["step_s"] - sum(prof["layers_s"].values())
            body.append(
                where
                + [
                    "outside the layers",
                    f"{rest:.2f}",
                    f"{rest / prof['step_s']:.0%}",
                    "-",
                ]
            )
    return head, body


def target_rows(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """The targets per setting and shape, met or missed, and what bounds the
    speed-up: a floor under the NumPy step (its matmul layers as timed in
    the step, plus attention's products at the sgemm peak) against 0.8
    times transformers' whole step."""
    head = [
        "threads",
        "B x T",
        "sgemm util. vs target",
        "speed-up vs target",
        "floor s",
        "0.8 x tf s",
        "left s",
    ]
    body = []
    for r in rows:
        for shape, s in r["shapes"].items():
            mfu, goal = s["sgemm_util"]["numpy"], MFU_TARGETS.get(shape)
            speedup = s["speedup"]["transformers"]
            floor = group_seconds(s, "matmul") + seconds_at_peak(s)["attention"]
            budget = s["best_s"]["transformers"] / SPEEDUP_TARGET
            body.append(
                [
                    r["setting"],
                    shape.replace("x", " x "),
                    f"{mfu:.0%} {'>=' if mfu >= goal else '<'} {goal:.0%}"
                    if goal
                    else f"{mfu:.0%}",
                    f"{speedup:.2f} "
                    f"{'>=' if speedup >= SPEEDUP_TARGET else '<'} "
                    f"{SPEEDUP_TARGET}",
                    f"{floor:.2f}",
                    f"{budget:.2f}",
                    f"{budget - floor:.2f}",
                ]
            )
    return head, body


def markdown(head: list[str], body: list[list[str]], left: int) -> str:
    """A Markdown pipe table; the first `left` columns left-aligned."""
    rule = [":---" if k < left else "---:" for k in range(len(head))]
    return "\n".join("| " + " | ".join(row) + " |" for row in [head, rule] + body)


def step_tables(rows: list[dict]) -> str:
    """The step rows as Markdown, one table per thread setting and shape,
    each headed by its setting and shape: without those two columns the
    table fits the book's text column at 1280 px, speed-up included."""
    head, body = step_rows(rows)
    tables = []
    for r in rows:
        for shape in r["shapes"]:
            key = [r["setting"], shape.replace("x", " x ")]
            group = [row[2:] for row in body if row[:2] == key]
            title = f"**B x T = {key[1]}, {r['setting']} threads**"
            tables.append(title + "\n\n" + markdown(head[2:], group, left=1))
    return "\n\n".join(tables)


def write_table(payload: dict, path: Path) -> None:
    """The Markdown that the performance appendix includes."""
    rows = payload["rows"]
    kernels, machine = rows[0]["kernels"], rows[0]["machine"]
    openblas = kernels["numpy"] or {}
    peaks = "; ".join(
        f"{shape}, {r['setting']} threads: NumPy "
        f"{s['sgemm_peak_gflops']['numpy']:.0f}, torch "
        f"{s['sgemm_peak_gflops']['torch']:.0f}"
        for r in rows
        for shape, s in r["shapes"].items()
    )
    kernel_env = (
        f" ({', '.join(payload['unset'])} unset for this run)"
        if payload["unset"]
        else ""
    )
    worst64 = max(r["validation_float64"]["worst_grad_rel_err"] for r in rows)
    system = "; ".join(
        f"{shape}, {r['setting']} threads: {s['profile']['system_cpu_s']:.2f} s, "
        f"{s['profile']['page_faults']:,} page faults"
        for r in rows
        for shape, s in r["shapes"].items()
    )
    load = ", ".join(map(str, machine.get("load_average") or []))
    theoretical = "; ".join(
        f"{r['setting']} threads: {r.get('theoretical_peak')}" for r in rows
    )
    caption = f"""
One float32 training step (forward and backward, no optimizer) of GPT-2 small
(124,439,808 parameters) on {machine.get("cpu_model")}
({machine.get("logical_cpus")} logical CPUs, load average
{load} at the end of the run). *step s*: the fastest of
{payload["repeats"]} steps taken in turn with the other sides; *median s*: their
median; *GFLOP/s*: model FLOPs (chapter 8's 6N + attention) per second;
*MFU*: that over the CPU's theoretical float32 peak as PaLM defines MFU
({theoretical}); *sgemm util.*: that over NumPy's sgemm peak, measured during
the same turns ({peaks} GFLOP/s), this machine's best matrix product, not
comparable with published MFU; *speed-up of NumPy*: this side's time /
NumPy's time (above 1: the book's NumPy step is faster); *peak MB*: the
memory one step allocates (NumPy: tracemalloc; PyTorch: its CPU allocator).
*numpy* is the book's step with the LM head, softmax and loss fused
(chapter 10's fused classifier, as chapter 9 runs it); *numpy unfused* the
same step holding the (B, T, V) logits, as chapter 6 runs it. NumPy's matrix
products run on OpenBLAS {openblas.get("version")} with its
{openblas.get("architecture")} kernel{kernel_env}, both PyTorch sides on
{kernels["torch"]["blas"].upper()} with CPU capability
{kernels["torch"]["cpu_capability"]}. Checked before timing: at the 124M
shape in float64 the loss and every gradient match transformers' (largest
relative difference {worst64:.0e}); in float32 the four losses agree.
"""
    profile = f"""
Where one NumPy step's time goes: the layer functions of `gpt/layers.py`,
timed where `gpt_forward` and `gpt_backward` call them, on one more step.
*s at sgemm peak*: the time the FLOPs of those matrix products would take at
NumPy's sgemm peak. CPU time the step spent in the kernel, mostly providing
fresh memory: {system}.
"""
    targets = """
The targets this benchmark was written for: sgemm utilisation of at least
75% at B = 4, T = 256 and 60% at B = 1, T = 1024, and a NumPy step at most 0.8
times transformers' (a speed-up of at least 1.25). *floor*: the NumPy
step's matmul layer functions' seconds from the profile above plus
attention's products at the sgemm peak, time the step cannot go below
without faster matrix products; *0.8 x tf*: 0.8 times transformers' step;
*left*: what that leaves for everything else (layer norms, GELU, the
softmaxes, copies). Where it is negative, no work on the rest of the step
could meet the speed-up target.
"""
    text = [
        step_tables(rows),
        caption,
        markdown(*profile_rows(rows), left=3),
        profile,
        markdown(*target_rows(rows), left=2),
        targets,
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(part.strip() + "\n" for part in text))


def print_verdicts(rows: list[dict]) -> None:
    """The targets, met or missed."""
    for r in rows:
        for shape, s in r["shapes"].items():
            mfu, target = s["sgemm_util"]["numpy"], MFU_TARGETS.get(shape)
            speedup = s["speedup"]["transformers"]
            goal = (
                f" (target {target:.0%}: {'met' if mfu >= target else 'missed'})"
                if target
                else ""
            )
            met = "met" if speedup >= SPEEDUP_TARGET else "missed"
            print(
                f"threads {r['setting']}, {shape}: NumPy MFU "
                f"{s['mfu']['numpy']:.0%}, sgemm util. {mfu:.0%}{goal}; "
                f"speed-up over transformers {speedup:.2f} "
                f"(target {SPEEDUP_TARGET}: {met})"
            )


# ---- the driver ---------------------------------------------------------------


def run_setting(setting: str, shapes: list[str], repeats: int) -> dict:
    """The worker in a subprocess with the threads (and malloc) of `setting`."""
    threads, _, extra = setting.partition("+")
    env = {"GPT2_124M_SHAPES": " ".join(shapes), **(MALLOC_VARS if extra else {})}
    return run_worker(
        __file__,
        setting,
        threads,
        repeats,
        extra_env=env,
        drop_env=FORCED_KERNEL_VARS + tuple(MALLOC_VARS),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--settings",
        nargs="+",
        default=["default"],
        help="thread settings: a count or 'default' (default), optionally "
        "followed by '+malloc'",
    )
    parser.add_argument(
        "--shapes",
        nargs="+",
        default=list(MFU_TARGETS),
        help="B x T of the steps (default: 4x256 1x1024)",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed steps per side (default 3)"
    )
    args = parse_args_or_run_worker(parser, worker)
    if args is None:  # this process was a worker
        return 0

    unset = [
        f"{k}={os.environ[k]}" for k in FORCED_KERNEL_VARS if k in os.environ
    ]
    if unset:
        print(
            f"This environment sets {', '.join(unset)}, which forces an older "
            f"OpenBLAS kernel: unset for this benchmark's workers (tests and "
            f"notebooks keep it)."
        )
    rows = [run_setting(s, args.shapes, args.repeats) for s in args.settings]
    print_table(*step_rows(rows), left_columns=3)
    print_table(*profile_rows(rows), left_columns=3)
    print()
    print_verdicts(rows)
    payload = {
        "benchmark": "gpt2_124m",
        "description": "one float32 training step (forward + backward) of GPT-2 "
        "small: the book's NumPy GPT vs transformers' GPT2LMHeadModel (eager) "
        "vs the book's PyTorch twin, CPU",
        "repeats": args.repeats,
        "unset": unset,
        "rows": rows,
    }
    write_results(RESULTS / "results.json", payload)
    write_table(payload, RESULTS / "table.md")
    print(f"wrote {(RESULTS / 'table.md').relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
