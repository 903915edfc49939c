"""Peak memory (and time) of the tiled layers of chapter 10 against the eager
layers they replace.

What it measures
    attention   backward of attention_backward (eager: the (B, NH, T, T)
                probabilities in its cache, a T x T gradient) and of
                flash_attention_backward (tiles only), at T = 512, 1024,
                2048; B = 1, NH = 4, C = 256, float32; the forward's output
                and cache exist before the measurement, dinp is allocated
                beforehand.  Targets (issue 28): the tiled backward's peak
                below the eager one's, and growing at most 2.5x from T =
                1024 to 2048 (eager: about 4x).
    classifier  the tied LM head + softmax + cross-entropy, forward and
                backward together: matmul_forward, crossentropy_softmax_*,
                matmul_backward (unfused) against fused_classifier_* at
                B x T = 512, C = 768, V = 50,257, float32, with the gradient
                buffers (dinp, dwte) allocated beforehand.  Target: the
                fused peak at most a quarter of the unfused one.
    Peaks are tracemalloc's (NumPy reports its arrays to it): bytes
    allocated above what existed when the measurement started.  Times are
    one run each, on a shared machine: indicative only.

How to run
    .venv/bin/python benchmarks/memory_layers.py
"""

from __future__ import annotations

import time
import tracemalloc
from functools import partial

import numpy as np

from backprop_lessons.gpt import layers as L


def peak(fn) -> tuple[int, float]:
    """(peak bytes above the start, seconds) of one call of fn()."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        t0 = time.perf_counter()
        fn()
        seconds = time.perf_counter() - t0
        return tracemalloc.get_traced_memory()[1] - before, seconds
    finally:
        tracemalloc.stop()


def attention_rows(Ts=(512, 1024, 2048), B=1, NH=4, C=256, tile=128):
    rng = np.random.default_rng(0)
    rows = []
    for T in Ts:
        inp = rng.standard_normal((B, T, 3 * C)).astype(np.float32)
        dout = rng.standard_normal((B, T, C)).astype(np.float32)
        row = {"T": T}
        for name, fwd, bwd in (
            ("eager", L.attention_forward, L.attention_backward),
            (
                "flash",
                lambda x, nh: L.flash_attention_forward(x, nh, tile),
                L.flash_attention_backward,
            ),
        ):
            _, cache = fwd(inp, NH)
            dinp = np.zeros_like(inp)
            row[name] = peak(partial(bwd, dinp, dout, cache))
        rows.append(row)
    return rows


def classifier_row(N=512, C=768, V=50257, chunk=8192):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, N, C)).astype(np.float32)
    wte = (0.02 * rng.standard_normal((V, C))).astype(np.float32)
    targets = rng.integers(0, V, (1, N))
    dx, dwte = np.zeros_like(x), np.zeros_like(wte)

    def unfused():
        logits, head = L.matmul_forward(x, wte, None)
        _, ce = L.crossentropy_softmax_forward(logits, targets)
        dlogits = np.zeros_like(logits)
        L.crossentropy_softmax_backward(dlogits, 1.0, ce)
        L.matmul_backward(dx, dwte, None, dlogits, head)

    def fused():
        _, cache = L.fused_classifier_forward(x, wte, targets, chunk)
        L.fused_classifier_backward(dx, dwte, 1.0, cache)

    return {"unfused": peak(unfused), "fused": peak(fused)}


def main() -> None:
    mb = 2**20
    print("attention backward, B=1 NH=4 C=256 float32, tracemalloc peak")
    print(
        f"{'T':>6} {'eager MB':>9} {'flash MB':>9} {'flash/eager':>11}"
        f" {'eager s':>8} {'flash s':>8}"
    )
    rows = attention_rows()
    for r in rows:
        (e, te), (f, tf) = r["eager"], r["flash"]
        print(
            f"{r['T']:>6} {e / mb:>9.1f} {f / mb:>9.1f} {f / e:>11.3f}"
            f" {te:>8.3f} {tf:>8.3f}"
        )
    by_t = {r["T"]: r for r in rows}
    for name in ("eager", "flash"):
        growth = by_t[2048][name][0] / by_t[1024][name][0]
        print(
            f"{name} peak growth T=1024 -> 2048: {growth:.2f}x"
            + ("  (target <= 2.5x)" if name == "flash" else "")
        )
    c = classifier_row()
    (u, tu), (f, tf) = c["unfused"], c["fused"]
    print("\nclassifier forward+backward, B*T=512 C=768 V=50257 float32")
    print(f"{'':>8} {'peak MB':>8} {'s':>7}")
    print(f"{'unfused':>8} {u / mb:>8.1f} {tu:>7.3f}")
    print(f"{'fused':>8} {f / mb:>8.1f} {tf:>7.3f}")
    print(f"fused/unfused peak: {f / u:.3f}  (target <= 0.25)")


if __name__ == "__main__":
    main()
