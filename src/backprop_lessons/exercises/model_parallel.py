"""Checks for the exercises of "The backward of model parallelism" (chapter
12).

    check_reduce_scatter_backward(reduce_scatter_backward)
    check_column_parallel_backward(column_parallel_backward)
    check_row_parallel_backward(row_parallel_backward)
    check_pipeline_schedule(one_f_one_b)
    check_all_gather_backward(all_gather_backward)
    check_broadcast_backward(broadcast_backward)

The reader writes backwards on a simulated group: a list that holds every
rank's array, rank r at index r (no processes needed; the chapter's runs on
two real processes confirm the same rules).  `all_reduce`, `all_gather` and
`reduce_scatter` are the collectives on such lists, for the reader's code.
A collective's check compares with the exact VJP and runs the dot-product
test a VJP must pass, sum_r <y_r, w_r> = sum_r <x_r, backward(w)_r> for
y = collective(x); the parallel layers' checks name the wrong gradient
(dx, dW, db), the rank, and the usual slip (f's all-reduce forgotten, g's
backward taken for an all-reduce).  The pipeline check plays the reader's
schedule (`simulate_schedule`): it rejects an order that deadlocks or
breaks a dependency, and reports the bubble and the micro-batches each
stage holds.  (The chapter's predictions are graded by
`predictions.check_prediction`.)

Every backward here is by hand: its check refuses (`run_check`'s
`refuse=`) the book's own backward of the same thing (the collectives'
`torch.autograd.Function`s in `scale.collectives`, Megatron's f and g, the
book's matmul rules), the package's finite-difference VJP, the Tensor
engine's backward and PyTorch's autograd.  The pipeline check refuses the
package's schedule builders (`pipeline.make_schedule`, `schedule_grid`,
PyTorch's timetables), which hand back a schedule.  Each check prints
"Exercise N: ..." and returns a `Verdict` (see `checking`).

`SELF_CHECKS` holds the chapter's self-check questions (`questions`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..gradcheck import close, largest_difference
from .checking import AUTOGRAD, NotAttempted, NotYet, Verdict, attempt, run_check
from .questions import Choice, Number

__all__ = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_gather_forward",
    "broadcast_forward",
    "reduce_scatter_forward",
    "check_reduce_scatter_backward",
    "check_column_parallel_backward",
    "check_row_parallel_backward",
    "simulate_schedule",
    "Played",
    "check_pipeline_schedule",
    "check_all_gather_backward",
    "check_broadcast_backward",
    "SELF_CHECKS",
]


# ---- the simulated group's collectives ---------------------------------------


def all_reduce(xs: list) -> list:
    """Every rank gets the sum of all ranks' arrays."""
    total = np.sum(xs, axis=0)
    return [total.copy() for _ in xs]


def all_gather(xs: list) -> list:
    """Every rank gets the concatenation of all ranks' arrays (axis 0)."""
    whole = np.concatenate(xs)
    return [whole.copy() for _ in xs]


def reduce_scatter(xs: list) -> list:
    """Rank r gets block r (axis 0) of the sum of all ranks' arrays."""
    return [b.copy() for b in np.split(np.sum(xs, axis=0), len(xs))]


# the names the checks' docstrings and chapter 12 have used for them
all_gather_forward = all_gather
reduce_scatter_forward = reduce_scatter


def broadcast_forward(xs: list, src: int) -> list:
    """Every rank gets rank src's array."""
    return [xs[src].copy() for _ in xs]


def _refused(*names: str) -> tuple:
    """What a backward written by hand here may not call: the book's own
    `scale.collectives` Functions' backwards named (as "AllGather", ...),
    its finite-difference VJP, the Tensor engine's backward and PyTorch's
    autograd (torch imported here)."""
    from .. import tensor as engine
    from ..scale import collectives

    return (
        *(getattr(collectives, name).backward for name in names),
        collectives.finite_difference_vjp,
        engine.Tensor.backward,
        engine.grad,
        AUTOGRAD,
    )


def _matmul_rules() -> tuple:
    """The book's matmul VJPs: a parallel layer's slice is a matmul."""
    from .. import tensor as engine
    from ..gpt import layers
    from .matmul_vjp import book_matmul_vjp

    return (
        engine.Tensor.matmul_backward,
        layers.matmul_backward,
        book_matmul_vjp,
    )


def _dot(a: list, b: list) -> float:
    return float(sum(np.vdot(x, y) for x, y in zip(a, b)))


def _arrays(got, world: int, what: str, shapes=None) -> list:
    """The reader's per-rank list as float64 arrays, or NotYet naming what
    is wrong with it: not a list, a list of another length, an entry that
    is None or not numbers, or (with `shapes`) of another shape."""
    if not isinstance(got, (list, tuple)):
        raise NotYet(
            f"return {what} as a list with one array per rank ({world} "
            f"here), got {type(got).__name__}"
        )
    if len(got) != world:
        raise NotYet(
            f"return {what} as a list with one array per rank: with {world} "
            f"ranks, got a list of {len(got)} (the check also tries other "
            f"numbers of ranks: use len() of the inputs)"
        )
    arrays = []
    for r, g in enumerate(got):
        if g is None:
            raise NotYet(f"with {world} ranks, rank {r}'s {what} is None")
        try:
            arrays.append(np.asarray(g, dtype=np.float64))
        except (TypeError, ValueError) as e:
            raise NotYet(
                f"with {world} ranks, rank {r}'s {what} is not an array of "
                f"numbers ({e})"
            ) from None
    for r, (g, shape) in enumerate(zip(arrays, shapes or ())):
        if g.shape != shape:
            raise NotYet(
                f"with {world} ranks, rank {r}'s {what} must have the shape "
                f"{shape}, got {g.shape}"
            )
    return arrays


def _check_backward(backward, forward, expected, todo, args, sizes, slips=()):
    """A collective's backward on simulated groups of each (world, n):
    the shapes, then the values against `expected`; `slips(ws, *args)`
    gives common wrong answers with their hints."""
    rng = np.random.default_rng(0)
    for world, n in sizes:
        xs = [rng.normal(size=n) for _ in range(world)]
        ys = forward(xs, *args)
        ws = [rng.normal(size=y.shape) for y in ys]
        got = attempt(backward, [w.copy() for w in ws], *args, todo=todo)
        want = expected(ws, *args)
        got = _arrays(got, world, "gradient", [e.shape for e in want])
        where = f"with {world} ranks" + "".join(
            f", {name} = {value}" for name, value in zip(("src",), args)
        )
        if close(np.concatenate(got), np.concatenate(want), 1e-12):
            continue
        for wrong, hint in slips(ws, *args) if slips else ():
            if close(np.concatenate(got), np.concatenate(wrong), 1e-12):
                raise NotYet(f"{where}: {hint}")
        lhs, rhs = _dot(ys, ws), _dot(xs, got)
        error = largest_difference(np.concatenate(got), np.concatenate(want))
        test = (
            f"the dot-product test fails: sum <y_r, w_r> = {lhs:.6f} but "
            f"sum <x_r, dx_r> = {rhs:.6f}"
            if not close(rhs, lhs, 1e-6)
            else f"the largest error is {error:.1e} (float64 is expected)"
        )
        raise NotYet(f"{where} {test}; which outputs did each input reach?")


def check_all_gather_backward(all_gather_backward, *, exercise: int) -> Verdict:
    """all_gather_backward(ws) -> dxs, ws[r] the cotangent of rank r's
    gathered output (world * n entries), dxs[r] that of rank r's input (n)."""

    def expected(ws):
        world = len(ws)
        total = np.sum(ws, axis=0)
        return list(np.split(total, world))

    def slips(ws):
        world = len(ws)
        return [
            (
                [np.split(w, world)[r] for r, w in enumerate(ws)],
                "that is block r of rank r's own cotangent only: every "
                "rank's output holds a copy of each input",
            ),
            (
                [b / world for b in expected(ws)],
                "that is the mean over the ranks: each copy's cotangent "
                "adds, no division",
            ),
        ]

    def check(fn):
        _check_backward(
            fn,
            all_gather,
            expected,
            "write all_gather_backward(ws) and run its cell",
            (),
            [(2, 3), (3, 2), (4, 1)],
            slips,
        )

    return run_check(
        exercise, check, all_gather_backward, refuse=_refused("AllGather")
    )


def check_broadcast_backward(broadcast_backward, *, exercise: int) -> Verdict:
    """broadcast_backward(ws, src) -> dxs for y_r = x_src on every rank."""

    def expected(ws, src):
        total = np.sum(ws, axis=0)
        return [total if r == src else np.zeros_like(w) for r, w in enumerate(ws)]

    def slips(ws, src):
        total = np.sum(ws, axis=0)
        return [
            (
                [total.copy() for _ in ws],
                "every rank got the sum, but only rank src's input reached "
                "the outputs: the other inputs' gradients are zero",
            ),
            (
                ws,
                "each rank kept its own cotangent: rank src's input reached "
                "every output, so its gradient is their sum, and the other "
                "inputs reached none",
            ),
        ]

    def check(fn):
        for src in (0, 1):
            _check_backward(
                fn,
                broadcast_forward,
                expected,
                "write broadcast_backward(ws, src) and run its cell",
                (src,),
                [(2, 3), (3, 2)],
                slips,
            )

    return run_check(
        exercise, check, broadcast_backward, refuse=_refused("Broadcast")
    )


def check_reduce_scatter_backward(
    reduce_scatter_backward, *, exercise: int
) -> Verdict:
    """reduce_scatter_backward(ws) -> dxs, ws[r] the cotangent of rank r's
    block of the sum (n / world entries), dxs[r] that of rank r's input
    (n entries)."""

    def expected(ws):
        whole = np.concatenate(ws)
        return [whole.copy() for _ in ws]

    def slips(ws):
        world = len(ws)
        return [
            (
                [
                    np.concatenate(
                        [w if q == r else np.zeros_like(w) for q in range(world)]
                    )
                    for r, w in enumerate(ws)
                ],
                "rank r's input has only its own block's cotangent: every "
                "input entered the sum, so block q of it reached rank q",
            ),
            (
                [b / world for b in expected(ws)],
                "that is divided by the number of ranks: each entry of an "
                "input reached one output, whose cotangent it gets whole",
            ),
        ]

    def check(fn):
        _check_backward(
            fn,
            reduce_scatter,
            expected,
            "write reduce_scatter_backward(ws) and run its cell",
            (),
            [(2, 6), (3, 3), (1, 2), (4, 4)],
            slips,
        )

    return run_check(
        exercise,
        check,
        reduce_scatter_backward,
        refuse=_refused("ReduceScatter", "ScatterToSequence"),
    )


# ---- tensor parallelism's two layers, on a simulated group --------------------


def _per_rank(got, world: int, what: str) -> list:
    return _arrays(got, world, what)


def _compare_per_rank(got, want, name, world, slips) -> None:
    """Name the first rank whose `name` is wrong, and the slip it matches:
    `slips` pairs a list of wrong answers (one per rank) with its hint."""
    for r, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape:
            raise NotYet(
                f"with {world} ranks, rank {r}'s {name} must have the shape "
                f"{w.shape}, got {g.shape}"
            )
    for r, (g, w) in enumerate(zip(got, want)):
        if close(g, w, 1e-12):
            continue
        for wrong, hint in slips:
            if wrong and close(g, wrong[r], 1e-12):
                raise NotYet(f"with {world} ranks, rank {r}'s {name}: {hint}")
        raise NotYet(
            f"with {world} ranks, rank {r}'s {name} is wrong (largest error "
            f"{largest_difference(g, w):.2e})"
        )


def _unpack(result, names, todo):
    if not isinstance(result, (list, tuple)) or len(result) != len(names):
        raise NotYet(f"return the tuple ({', '.join(names)})")
    if any(part is None or part is Ellipsis for part in result):
        raise NotAttempted(todo)
    return result


def check_column_parallel_backward(
    column_parallel_backward, *, exercise: int
) -> Verdict:
    """column_parallel_backward(x, weights, dys) -> (dxs, dweights, dbiases).

    y_r = x W_r^T + b_r: x (N, C) is replicated (every rank holds it,
    through f), rank r holds the rows W_r (OC/R, C), b_r (OC/R,) and
    computes its columns y_r (N, OC/R); dys[r] is their cotangent.  dxs[r]
    (N, C) is x's gradient as rank r holds it after f's backward,
    dweights[r] and dbiases[r] its slices' gradients."""
    todo = "write column_parallel_backward(x, weights, dys) and run its cell"

    def check(fn):
        rng = np.random.default_rng(1)
        for world, N, C, per in ((2, 3, 4, 3), (3, 1, 2, 1), (1, 2, 3, 2)):
            x = rng.normal(size=(N, C))
            weights = [rng.normal(size=(per, C)) for _ in range(world)]
            dys = [rng.normal(size=(N, per)) for _ in range(world)]
            result = attempt(
                fn,
                x.copy(),
                [w.copy() for w in weights],
                [d.copy() for d in dys],
                todo=todo,
            )
            dxs, dws, dbs = _unpack(result, ("dxs", "dweights", "dbiases"), todo)
            dxs = _per_rank(dxs, world, "dxs")
            dws = _per_rank(dws, world, "dweights")
            dbs = _per_rank(dbs, world, "dbiases")
            parts = [d @ w for d, w in zip(dys, weights)]
            dx = np.sum(parts, axis=0)
            _compare_per_rank(
                dxs,
                [dx] * world,
                "dx",
                world,
                [
                    (
                        parts if world > 1 else [],
                        "it holds only its own slice's part dy_r W_r. x "
                        "reached every rank's slice, so its gradient is the "
                        "sum of the parts: f's backward is an all-reduce",
                    ),
                    (
                        [world * dx] * world if world > 1 else [],
                        f"it is {world} times the gradient: add the ranks' "
                        "parts once",
                    ),
                ],
            )
            own = [d.T @ x for d in dys]
            _compare_per_rank(
                dws,
                own,
                "dW",
                world,
                [
                    (
                        [np.sum(own, axis=0)] * world if world > 1 else [],
                        "it is the sum over the ranks; a slice's weight "
                        "gradient is dy_r^T x, from what the rank holds",
                    ),
                ],
            )
            _compare_per_rank(
                dbs,
                [d.sum(axis=0) for d in dys],
                "db",
                world,
                [],
            )

    refused = _refused("CopyToParallel", "SequenceParallelLinear")
    return run_check(
        exercise,
        check,
        column_parallel_backward,
        refuse=refused + _matmul_rules(),
    )


def check_row_parallel_backward(
    row_parallel_backward, *, exercise: int
) -> Verdict:
    """row_parallel_backward(xs, weights, dys) -> (dxs, dweights, dbiases).

    y = g(sum_r x_r W_r^T) + b: rank r holds the input columns x_r
    (N, C/R) and the matching columns W_r (OC, C/R); g adds the partial
    products, and the bias b (OC,), replicated, is added once.  y is
    replicated: dys[r] (N, OC) is its cotangent as rank r holds it, the
    same on every rank.  dxs[r], dweights[r] are rank r's slices'
    gradients, dbiases[r] the bias's gradient as rank r holds it."""
    todo = "write row_parallel_backward(xs, weights, dys) and run its cell"

    def check(fn):
        rng = np.random.default_rng(2)
        for world, N, per, OC in ((2, 3, 2, 4), (3, 1, 1, 2), (1, 2, 3, 2)):
            xs = [rng.normal(size=(N, per)) for _ in range(world)]
            weights = [rng.normal(size=(OC, per)) for _ in range(world)]
            dy = rng.normal(size=(N, OC))
            result = attempt(
                fn,
                [a.copy() for a in xs],
                [w.copy() for w in weights],
                [dy.copy() for _ in range(world)],
                todo=todo,
            )
            dxs, dws, dbs = _unpack(result, ("dxs", "dweights", "dbiases"), todo)
            dxs = _per_rank(dxs, world, "dxs")
            dws = _per_rank(dws, world, "dweights")
            dbs = _per_rank(dbs, world, "dbiases")
            too_much = (
                f"it is {world} times the gradient: dy is the cotangent of "
                f"one replicated value, already whole on every rank, so g's "
                f"backward is the identity; an all-reduce adds the {world} "
                f"copies"
            )

            def times_world(want, world=world):
                return [world * w for w in want] if world > 1 else []

            summed = (
                "it is the sum over the ranks, as f's backward would give; "
                "but x_r and W_r are this rank's own slices, used by no "
                "other rank: their gradients need no collective"
            )

            def all_reduced(want, world=world):
                return all_reduce(want) if world > 1 else []

            want_dx = [dy @ w for w in weights]
            _compare_per_rank(
                dxs,
                want_dx,
                "dx",
                world,
                [
                    (times_world(want_dx), too_much),
                    (all_reduced(want_dx), summed),
                ],
            )
            want_dw = [dy.T @ a for a in xs]
            _compare_per_rank(
                dws,
                want_dw,
                "dW",
                world,
                [
                    (times_world(want_dw), too_much),
                    (all_reduced(want_dw), summed),
                ],
            )
            db = dy.sum(axis=0)
            _compare_per_rank(
                dbs,
                [db] * world,
                "db",
                world,
                [
                    (
                        times_world([db] * world),
                        f"it is {world} times the gradient: the bias is "
                        f"added once, after g, so its gradient is dy summed "
                        f"over the positions, on every rank alike",
                    ),
                    (
                        [db / world] * world if world > 1 else [],
                        "it is a share of the gradient: the bias was added "
                        "once, whole, and every rank holds its whole gradient",
                    ),
                    (
                        [db] + [np.zeros_like(db)] * (world - 1)
                        if world > 1
                        else [],
                        "it is zero: every rank holds the replicated bias, "
                        "and its whole gradient, to take the same step",
                    ),
                ],
            )

    refused = _refused("ReduceFromParallel")
    return run_check(
        exercise, check, row_parallel_backward, refuse=refused + _matmul_rules()
    )


# ---- a pipeline schedule, played ---------------------------------------------


@dataclass(frozen=True)
class Played:
    """A schedule played with forwards of `t_f` and backwards of `t_b`:
    the step's length, each stage's idle share, and the most micro-batches
    whose activations each stage held at once."""

    span: float
    bubble: tuple[float, ...]
    in_flight: tuple[int, ...]


def _action(a) -> tuple[str, int]:
    text = str(a).strip()
    if len(text) < 2 or text[0] not in "FB" or not text[1:].isdigit():
        raise NotYet(
            f'write each step as "F<k>" or "B<k>" (the forward or backward '
            f"of micro-batch k), got {a!r}"
        )
    return text[0], int(text[1:])


def simulate_schedule(
    orders: list, n_micro: int, t_f: float = 1.0, t_b: float = 2.0
) -> Played:
    """Play a pipeline schedule: orders[s] is stage s's list of "F<k>" and
    "B<k>" in the order it runs them.  The forward of micro-batch k on
    stage s needs its forward on stage s - 1; its backward needs its
    forward on stage s and its backward on stage s + 1.  Each stage starts
    a step as soon as the stage is free and the step's inputs have arrived
    (messages take no time).  Raises ValueError for an order that runs a
    step twice, misses one, or can never finish (a deadlock)."""
    p = len(orders)
    steps = [[_action(a) for a in order] for order in orders]
    want = sorted((k, mb) for k in "FB" for mb in range(n_micro))
    for s, order in enumerate(steps):
        if sorted(order) != want:
            seen = {}
            for a in order:
                seen[a] = seen.get(a, 0) + 1
            twice = [f"{k}{mb}" for (k, mb), n in sorted(seen.items()) if n > 1]
            missing = [f"{k}{mb}" for k, mb in want if (k, mb) not in seen]
            extra = [f"{k}{mb}" for k, mb in seen if mb >= n_micro]
            what = "; ".join(
                part
                for part in (
                    twice and f"{', '.join(twice)} more than once",
                    missing and f"no {', '.join(missing)}",
                    extra
                    and f"{', '.join(extra)} beyond the {n_micro} micro-batches",
                )
                if part
            )
            raise ValueError(
                f"stage {s} must run F and B of each of the {n_micro} "
                f"micro-batches once: {what}"
            )
    done: dict[tuple[str, int, int], tuple[float, float]] = {}
    free, pos = [0.0] * p, [0] * p

    def needs(k, mb, s):
        if k == "F":
            return [("F", mb, s - 1)] if s > 0 else []
        return [("F", mb, s)] + ([("B", mb, s + 1)] if s < p - 1 else [])

    progress = True
    while progress:
        progress = False
        for s in range(p):
            while pos[s] < len(steps[s]):
                k, mb = steps[s][pos[s]]
                deps = needs(k, mb, s)
                if any(d not in done for d in deps):
                    break
                start = max([free[s], *(done[d][1] for d in deps)])
                end = start + (t_f if k == "F" else t_b)
                done[k, mb, s] = (start, end)
                free[s], pos[s] = end, pos[s] + 1
                progress = True
    stuck = [s for s in range(p) if pos[s] < len(steps[s])]
    if stuck:
        waits = []
        for s in stuck:
            k, mb = steps[s][pos[s]]
            missing = [d for d in needs(k, mb, s) if d not in done]
            waits.append(
                f"stage {s} waits to run {k}{mb} for "
                + ", ".join(f"{dk}{dm} of stage {ds}" for dk, dm, ds in missing)
            )
        raise ValueError(
            "the schedule deadlocks: " + "; ".join(waits) + ", each of which "
            "comes later in its own stage's order"
        )
    span = max(end for _, end in done.values())
    work = n_micro * (t_f + t_b)
    peaks = []
    for s in range(p):
        events = sorted(
            [(done["F", mb, s][0], 1) for mb in range(n_micro)]
            + [(done["B", mb, s][1], -1) for mb in range(n_micro)]
        )
        live = peak = 0
        for _, change in events:  # at equal times a backward ends first
            live += change
            peak = max(peak, live)
        peaks.append(peak)
    return Played(
        span=span,
        bubble=tuple(1 - work / span for _ in range(p)),
        in_flight=tuple(peaks),
    )


def check_pipeline_schedule(one_f_one_b, *, exercise: int) -> Verdict:
    """one_f_one_b(p, m) -> orders: for each of the p stages the list of
    "F<k>" / "B<k>" it runs, in order, for m micro-batches.  Played with a
    backward twice as long as a forward, a 1F1B schedule finishes in
    (m + p - 1)(t_f + t_b), as GPipe does, while stage s holds at most
    min(m, p - s) micro-batches."""
    todo = "write one_f_one_b(p, m) and run its cell"

    def check(fn):
        played = []
        for p, m in ((2, 4), (4, 8), (3, 2), (1, 3), (4, 4)):
            orders = attempt(fn, p, m, todo=todo)
            if not isinstance(orders, (list, tuple)) or len(orders) != p:
                raise NotYet(
                    f"with p = {p} return a list of {p} orders, one per stage"
                )
            for s, order in enumerate(orders):
                if not isinstance(order, (list, tuple)):
                    raise NotYet(
                        f"with p = {p}, m = {m}, stage {s}'s order must be a "
                        f"list of steps, got {type(order).__name__}"
                    )
            try:
                run = simulate_schedule([list(o) for o in orders], m)
            except ValueError as e:
                raise NotYet(f"with p = {p}, m = {m}: {e}") from None
            best = (m + p - 1) * 3.0
            limit = [min(m, p - s) for s in range(p)]
            for s, (held, most) in enumerate(zip(run.in_flight, limit)):
                if held > most:
                    raise NotYet(
                        f"with p = {p}, m = {m} the order is valid, but "
                        f"stage {s} holds {held} micro-batches' activations "
                        f"at once; 1F1B holds at most min(m, p - s) = {most}: "
                        f"start each backward as soon as it can run"
                    )
            if run.span > best + 1e-9:
                raise NotYet(
                    f"with p = {p}, m = {m} the order is valid and within "
                    f"memory, but the step takes {run.span:g} (a forward "
                    f"takes 1, a backward 2) where 1F1B takes "
                    f"(m + p - 1)(t_f + t_b) = {best:g}: some stage waits "
                    f"where a step of its own could already run"
                )
            # the in-flight counts only: the bubble is exercise 7's answer
            played.append(f"p = {p}, m = {m}: in flight {list(run.in_flight)}")
        return "    " + "\n    ".join(played)

    return run_check(exercise, check, one_f_one_b, refuse=_schedule_builders())


def _schedule_builders() -> tuple:
    """What one_f_one_b may not call: the package's builders of a schedule
    (PyTorch's, run or timetabled) and PyTorch's own 1F1B order."""
    from torch.distributed.pipelining import schedules

    from ..scale import pipeline
    from ..torch_private import schedule_timetable

    torch_1f1b = getattr(schedules, "_get_1f1b_rank_ops", None)
    return (
        pipeline.make_schedule,
        pipeline.schedule_grid,
        pipeline.pipeline_run,
        schedule_timetable,
        *((torch_1f1b,) if torch_1f1b is not None else ()),
    )


# ---- self-checks -------------------------------------------------------------

#: The chapter's self-check questions, shown by `widgets.self_check`.
SELF_CHECKS = {
    "activation-elements-per-rank": Number(
        "A model has n_layer = 24 blocks of width C = 2048. One tensor-parallel "
        "step processes 4,096 tokens. How many million elements does each rank "
        "put into all-reduces (forward and backward)?",
        answer=4 * 24 * 4096 * 2048 / 1e6,
        rel_tolerance=1e-3,
        unit="million",
        hint="Four all-reduces of (tokens, C) per block: two forward, two "
        "backward.",
        explanation="4 · 24 · 4,096 · 2,048 = 805.3 million elements.",
    ),
    "1f1b-in-flight": Number(
        "A 1F1B pipeline has p = 8 stages and m = 32 micro-batches. How many "
        "micro-batches' activations does stage 0 hold at most?",
        answer=8,
        hint="1F1B: stage s holds at most p - s micro-batches.",
        explanation="p - 0 = 8 (GPipe would hold all 32). The bubble is "
        "7/39, about 0.18, in both.",
    ),
    "interleaved-bubble": Number(
        "An interleaved 1F1B pipeline runs on p = 4 ranks with v = 2 stages "
        "each and m = 8 micro-batches. What share of the step does each rank "
        "idle?",
        answer=3 / 19,
        rel_tolerance=0.02,
        hint="The ramp-up and ramp-down take (p - 1) stage slots, and a "
        "stage is 1/v of the rank's work: (p - 1) / (v m + p - 1).",
        explanation="3 / (16 + 3) = 3/19, about 0.158; without interleaving "
        "it is 3/11, about 0.273.",
    ),
    "sequence-parallel-partial": Choice(
        "Under sequence parallelism, which gradients must be all-reduced over "
        "the tensor-parallel ranks after the backward?",
        choices=[
            "The layer norms' weights and biases, and the row-parallel "
            "layers' biases",
            "The column-parallel layers' weights",
            "Every gradient, as in data parallelism",
            "None: the reduce-scatters already summed them",
        ],
        answer=0,
        hint="Which parameters does a rank apply to its own positions only?",
        explanation="The layer norms and the biases added after the "
        "reduce-scatter act on the rank's T / R positions, so each rank "
        "holds the part of their gradient from those positions. The split "
        "matrices see every position (their inputs are all-gathered) and "
        "their slices' gradients are complete.",
    ),
}
