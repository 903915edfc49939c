"""One launch of two local gloo ranks for every test file that checks
something on two ranks.

A rank costs seconds of CPU before its first task (an interpreter that
imports torch, gloo's connections, and torch._dynamo, which DDP imports when
it wraps a model), so the files that check results of two ranks
(test_distributed, test_scale_out, and chapter 12's files through
chapter12_launch) do not launch their own: each declares a module fixture
that reads its results, and registers the tasks behind it under that
fixture's name:

    @two_ranks.tasks_for("distributed_ranks")
    def _tasks() -> dict:        # name -> (function, args), as run_tasks takes
        ...

    @pytest.fixture(scope="module")
    def distributed_ranks(rank_launch):
        return rank_launch["distributed_ranks"]   # a dict per rank

The session fixture `rank_launch` (tests/conftest.py makes it visible to
every file) runs, in one `run_workers` launch, the tasks of every
registered fixture that a selected test uses, so `pytest -k` or `make
chapter` starts no task it does not need.  Each rank runs the tasks in the
same order, each file's under its own names.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

#: the time limit of the launch once both ranks are up (chapter 12's tasks,
#: the longest, take seconds; a loaded machine, tens)
TIMEOUT_S = 180.0
_TASKS: dict[str, Callable[[], dict]] = {}


def tasks_for(fixture: str):
    """Register the function that builds `fixture`'s tasks."""

    def register(build: Callable[[], dict]) -> Callable[[], dict]:
        if fixture in _TASKS:
            raise ValueError(f"two_ranks: tasks for {fixture} registered twice")
        _TASKS[fixture] = build
        return build

    return register


@pytest.fixture(scope="session")
def rank_launch(request, trainer_launcher) -> dict[str, list[dict]]:
    """fixture name -> its tasks' results, one dict per rank (rank order).

    After `trainer_launcher`: chapter 12's trainer runs, when selected,
    start in the background first and go on while this launch runs."""
    from backprop_lessons.scale import distributed

    used = {
        name
        for item in request.session.items
        for name in getattr(item, "fixturenames", ())  # nbval cells have none
    }
    wanted = sorted(name for name in _TASKS if name in used)
    tasks = {
        (fixture, name): task
        for fixture in wanted
        for name, task in _TASKS[fixture]().items()
    }
    if not tasks:
        return {}
    ranks = distributed.run_workers(
        distributed.run_tasks, tasks, world_size=2, timeout=TIMEOUT_S
    )
    return {
        fixture: [
            {name: r[fixture, name] for (f, name) in tasks if f == fixture}
            for r in ranks
        ]
        for fixture in wanted
    }
