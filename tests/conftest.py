"""Shared test configuration: the hypothesis profile `ci`, loaded by default.

`ci` has no deadline (shared CI machines are slow and noisy) and is
derandomized, so every run draws the same examples and a failure can be
reproduced exactly.  Select another profile with
`pytest --hypothesis-profile=NAME`.
"""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    database=None,  # derandomized runs have nothing to replay
    max_examples=50,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
# Fresh random draws and more of them, e.g. before a release:
# `pytest --hypothesis-profile=thorough tests/test_scalar.py`.
settings.register_profile(
    "thorough",
    parent=settings.get_profile("ci"),
    derandomize=False,
    max_examples=1000,
)
settings.load_profile("ci")
