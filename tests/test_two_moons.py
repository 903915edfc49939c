"""backprop_lessons.data: generated datasets, seeded."""

import math

import pytest

from backprop_lessons.data import two_moons


def test_two_moons_shapes_and_labels():
    X, y = two_moons(101, noise=0.1, seed=3)
    assert len(X) == len(y) == 101
    assert all(len(p) == 2 and all(isinstance(c, float) for c in p) for p in X)
    assert sorted(set(y)) == [0, 1]
    assert y.count(0) == 50 and y.count(1) == 51


def test_two_moons_is_seeded():
    assert two_moons(50, 0.2, seed=1) == two_moons(50, 0.2, seed=1)
    assert two_moons(50, 0.2, seed=1) != two_moons(50, 0.2, seed=2)


def test_two_moons_without_noise_lies_on_the_half_circles():
    X, y = two_moons(40, noise=0.0, seed=0)
    for (u, v), label in zip(X, y):
        cx, cy = (0.0, 0.0) if label == 0 else (1.0, 0.5)
        assert math.isclose(math.hypot(u - cx, v - cy), 1.0, abs_tol=1e-12)
        assert (v >= -1e-12) if label == 0 else (v <= 0.5 + 1e-12)


def test_two_moons_is_shuffled():
    _, y = two_moons(100, noise=0.1, seed=0)
    assert y[:50] != [0] * 50


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n": 1}, "n must be an int of at least 2"),
        ({"n": 10.0}, "n must be an int"),
        ({"noise": -0.1}, "noise must be a number >= 0"),
    ],
)
def test_two_moons_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        two_moons(**kwargs)
