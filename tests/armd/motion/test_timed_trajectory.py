"""The quintic curve of a timed trajectory sampled at many times at once, and its speed bounds."""

from __future__ import annotations

import numpy as np

from armd.motion.timed_trajectory import QuinticCurve


def _random_curve(rng: np.random.Generator) -> QuinticCurve:
    m = int(rng.integers(2, 12))
    times = np.cumsum(np.r_[0.0, rng.uniform(0.05, 2.0, m - 1)])
    return QuinticCurve.through(times, rng.uniform(-2.0, 2.0, (m, 3)), None)


def test_positions_at_many_times_equal_the_curve_at_each() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        curve = _random_curve(rng)
        end = float(curve.times[-1])
        times = np.concatenate([rng.uniform(-0.5, end + 0.5, 50), curve.times])
        expected = np.array([curve.at(float(t))[0] for t in times])
        np.testing.assert_allclose(curve.positions_at(times), expected, rtol=0.0, atol=1e-12)
        inside = np.clip(times, 0.0, end)
        velocities = np.array([curve.at(float(t))[1] for t in inside])
        np.testing.assert_allclose(_velocities(curve, inside), velocities, atol=1e-12)


def _velocities(curve: QuinticCurve, times: np.ndarray) -> np.ndarray:
    """q̇ (k, n) at `times` inside the curve's span, from its polynomial coefficients."""
    i = np.minimum(np.searchsorted(curve.times, times, side="right") - 1, curve.times.size - 2)
    tau = (times - curve.times[i])[:, None]
    c = curve.coefficients[i]
    return sum(k * c[:, k] * tau ** (k - 1) for k in range(1, 6))  # type: ignore[no-any-return]


def test_speed_bounds_hold_every_speed_and_are_close_to_the_largest() -> None:
    """Within each part (at least 16, cut at every knot) the bound is at least every |q̇| of 400
    samples, and close to their largest where the joint moves (the Bernstein hull of a quartic
    over a short part is nearly tight: the median equal, 95 % within 15 %)."""
    rng = np.random.default_rng(5)
    ratios = []
    for _ in range(60):
        curve = _random_curve(rng)
        times, bounds = curve.speed_bounds(16)
        assert times[0] == 0.0
        assert times[-1] == curve.times[-1]
        assert np.all(np.isin(curve.times, times))
        assert times.shape[0] >= 17
        for k in range(times.shape[0] - 1):
            dense = np.linspace(times[k], times[k + 1], 400)
            speed = np.abs(_velocities(curve, dense)).max(axis=0)
            assert np.all(bounds[k] >= speed * (1.0 - 1e-12) - 1e-12)
            moving = speed > 0.05
            ratios.extend(bounds[k][moving] / speed[moving])
    assert np.median(ratios) < 1.0 + 1e-6
    assert np.percentile(ratios, 95) < 1.15
