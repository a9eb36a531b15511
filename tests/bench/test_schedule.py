import numpy as np
import pytest

from conveyor.bench.schedule import send_times, split_concurrency


def test_constant_schedule_is_evenly_spaced():
    times = send_times(100, 1.0, distribution="constant")
    assert len(times) == 100
    np.testing.assert_allclose(times, np.arange(100) / 100)
    assert times[-1] < 1.0


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_constant_split_between_workers_is_the_same_schedule(workers):
    whole = send_times(250, 2.0, distribution="constant")
    parts = [
        send_times(250, 2.0, distribution="constant", worker=w, workers=workers)
        for w in range(workers)
    ]
    np.testing.assert_allclose(np.sort(np.concatenate(parts)), whole)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_poisson_count_and_gaps(seed):
    rate, duration = 2000, 5.0
    times = send_times(rate, duration, distribution="poisson", seed=seed)
    expected = rate * duration  # 10,000; the count's standard deviation is 100
    assert abs(len(times) - expected) < 5 * np.sqrt(expected)
    assert np.all(np.diff(times) >= 0)
    assert times[0] >= 0 and times[-1] < duration
    gaps = np.diff(times)
    assert gaps.mean() == pytest.approx(1 / rate, rel=0.05)
    assert gaps.std() == pytest.approx(1 / rate, rel=0.1)  # exponential: std == mean


def test_poisson_is_reproducible_and_workers_differ():
    a = send_times(500, 1.0, distribution="poisson", seed=7)
    b = send_times(500, 1.0, distribution="poisson", seed=7)
    np.testing.assert_array_equal(a, b)
    w0 = send_times(500, 1.0, distribution="poisson", seed=7, worker=0, workers=2)
    w1 = send_times(500, 1.0, distribution="poisson", seed=7, worker=1, workers=2)
    assert not np.array_equal(w0[:10], w1[:10])
    assert abs(len(w0) + len(w1) - 500) < 5 * np.sqrt(500)


def test_bad_schedules_are_rejected():
    with pytest.raises(ValueError, match="positive"):
        send_times(0, 1.0)
    with pytest.raises(ValueError, match="distribution"):
        send_times(10, 1.0, distribution="bursty")


@pytest.mark.parametrize(
    ("c", "w", "expected"), [(16, 1, [16]), (16, 2, [8, 8]), (5, 2, [3, 2]), (1, 3, [1, 0, 0])]
)
def test_split_concurrency(c, w, expected):
    assert split_concurrency(c, w) == expected
