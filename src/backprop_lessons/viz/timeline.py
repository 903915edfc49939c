"""A DDP step as a timeline: compute phases on top, one row per gradient bucket below.

Draws a `scale_out.StepTrace` (from `scale_out.profile_ddp_steps`) with
matplotlib: forward, backward's computation, the wait at the end of
`loss.backward()` and the optimizer step on the first row; each bucket's
all-reduce as a bar from the moment a gloo thread starts it to the moment it
completes, with a tick where backward launched it.  The backward's
computation is shaded across all rows, so the part of every bar inside the
shade is communication hidden behind backward.
"""

from __future__ import annotations

__all__ = ["bucket_label", "plot_step_timeline"]

PHASE_COLORS = {"forward": "#4c72b0", "backward": "#dd8452",
                "wait": "#c44e52", "optimizer": "#55a868"}


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


def plot_step_timeline(trace, ax=None, title: str | None = None):
    """Draw one StepTrace on `ax` (a new figure if None); returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        rows = 1 + len(trace.allreduces)
        _, ax = plt.subplots(figsize=(9, 1.2 + 0.35 * rows))
    bw = trace.backward
    phases = [("forward", trace.forward.start, trace.forward.end),
              ("backward", bw.start, bw.end),
              ("wait", bw.end, trace.backward_call.end),
              ("optimizer", trace.optimizer.start, trace.optimizer.end)]
    for name, start, end in phases:
        if end > start:
            ax.broken_barh([(start, end - start)], (-0.4, 0.8),
                           color=PHASE_COLORS[name], label=name)
    ax.axvspan(bw.start, bw.end, color=PHASE_COLORS["backward"], alpha=0.12,
               lw=0)
    labels = ["compute (rank 0)"]
    for row, a in enumerate(trace.allreduces, start=1):
        ax.broken_barh([(a.start, a.end - a.start)], (row - 0.3, 0.6),
                       color="#8172b3",
                       label="all-reduce" if row == 1 else None)
        ax.plot([a.launch], [row], marker="|", color="black", ms=12,
                label="launched" if row == 1 else None)
        labels.append(f"bucket {a.bucket}: {bucket_label(a.params)}")
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("milliseconds since the step started")
    ax.set_title(title or f"one DDP step: "
                 f"{trace.hidden_fraction():.0%} of the communication time "
                 f"hidden behind backward", pad=22)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0),
              fontsize="small", ncol=6, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return ax
