"""make test's xdist groups take effect.

`--dist loadgroup` keeps a group's tests on one worker by the "@group" that
xdist's own collection hook appends to their ids, from their
`xdist_group` markers.  tests/conftest.py adds those markers for the tests
that start processes and for the JupyterLab tests (the root conftest.py
for the cells of the notebooks that start processes): added after xdist's
hook, they are ignored, and those tests ran on both workers at once.
"""

from __future__ import annotations

import pytest


def test_the_process_and_jupyterlab_tests_are_grouped(request):
    config = request.config
    if not getattr(config.option, "loadgroup", False):  # set by xdist
        pytest.skip("checked under make test's --dist loadgroup")
    ungrouped = [
        item.nodeid
        for item in request.session.items
        for group in ("multiprocess", "jupyterlab")  # each its marker's name
        if item.get_closest_marker(group)
        and not item.nodeid.endswith(f"@{group}")
    ]
    assert not ungrouped, (
        f"{len(ungrouped)} tests out of their xdist group, so they run on "
        f"any worker (tests/conftest.py's hook must run before xdist's): "
        f"{ungrouped[:5]}"
    )
