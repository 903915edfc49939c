"""Functions the tests run on worker processes of `scale.distributed`.

`run_workers` starts each rank as a fresh interpreter that imports the
function by module and name, so a test's rank function must live in an
importable module: this one (pytest puts tests/ on sys.path, and spawned
workers inherit it).  Nothing here belongs in the package.
"""

from __future__ import annotations

import torch.distributed as dist


def fail_on_rank(rank: int, world_size: int, failing_rank: int = 1) -> int:
    """Raise a ValueError on `failing_rank`; the other ranks wait in a
    collective until the failure ends them."""
    if rank == failing_rank:
        raise ValueError(f"fail_on_rank: rank {rank} fails on purpose")
    dist.barrier()
    return rank
