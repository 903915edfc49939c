"""A DDP step as a timeline: each rank's compute on top, one row per gradient
bucket below.

Draws a `scale_out.StepOverlap` (the ranks' `StepTrace`s of one step, from
`scale_out.profile_ddp_steps`, on one time axis) with matplotlib.  One row
per rank: forward, backward's computation, the wait at the end of
`loss.backward()`, the optimizer step.  One row per bucket: a tick where
each rank launched its all-reduce, a light bar from the first launch until
every rank has started it (waiting for a free gloo thread or for a slower
rank), a dark bar while the data travels.  A dashed
line marks the end of the slowest rank's backward: transfer time left of it
is hidden behind backward.
"""

from __future__ import annotations

__all__ = ["bucket_label", "plot_step_timeline"]

PHASE_COLORS = {
    "forward": "#4c72b0",
    "backward": "#dd8452",
    "wait": "#c44e52",
    "optimizer": "#55a868",
}
TRANSFER, WAITING = "#8172b3", "#d0c8e8"
LAUNCH_MARKERS = ("|", "x", "+", "1")


def bucket_label(params) -> str:
    """A short name for a bucket's parameters: 'lnf, block 3', 'block 0,
    wpe, wte'."""
    parts: list[str] = []
    for name in params:
        if name.startswith("blocks."):
            part = f"block {name.split('.')[1]}"
        else:
            part = name[:-1] if name in ("lnfw", "lnfb") else name
        if part not in parts:
            parts.append(part)
    return ", ".join(parts)


def plot_step_timeline(step, ax=None, title: str | None = None):
    """Draw one StepOverlap on `ax` (a new figure if None); returns the
    axes."""
    import matplotlib.pyplot as plt

    ranks, transfers = step.ranks, step.transfers()
    if ax is None:
        rows = len(ranks) + len(transfers)
        _, ax = plt.subplots(figsize=(9, 1.3 + 0.35 * rows))
    labels = []
    for row, t in enumerate(ranks):
        phases = [
            ("forward", t.forward.start, t.forward.end),
            ("backward", t.backward.start, t.backward.end),
            ("wait", t.backward.end, t.backward_call.end),
            ("optimizer", t.optimizer.start, t.optimizer.end),
        ]
        for name, start, end in phases:
            if end > start:
                ax.broken_barh(
                    [(start, end - start)],
                    (row - 0.4, 0.8),
                    color=PHASE_COLORS[name],
                    label=name if row == 0 else None,
                )
        labels.append(f"rank {t.rank}")
    for k, span in enumerate(transfers):
        row = len(ranks) + k
        first = min(t.allreduces[k].launch for t in ranks)
        ax.broken_barh(
            [(first, span.start - first)],
            (row - 0.3, 0.6),
            color=WAITING,
            label="waiting" if k == 0 else None,
        )
        ax.broken_barh(
            [(span.start, span.ms)],
            (row - 0.3, 0.6),
            color=TRANSFER,
            label="transfer" if k == 0 else None,
        )
        for t, marker in zip(ranks, LAUNCH_MARKERS):
            ax.plot(
                [t.allreduces[k].launch],
                [row],
                marker=marker,
                color="black",
                ms=9,
                ls="none",
                label=f"launched by rank {t.rank}" if k == 0 else None,
            )
        labels.append(
            f"bucket {k}: {bucket_label(ranks[0].allreduces[k].params)}"
        )
    ax.axvline(step.backward_end, color="black", ls="--", lw=1)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlabel(
        "milliseconds since the step started on rank 0 "
        "(dashed: the slowest backward ends)"
    )
    ax.set_title(
        title
        or f"one DDP step: {step.hidden_fraction():.0%} of "
        f"the transfer time hidden behind backward",
        pad=40,
    )
    ax.legend(
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        fontsize="small",
        ncol=5,
        frameon=False,
    )
    ax.grid(axis="x", alpha=0.3)
    return ax
