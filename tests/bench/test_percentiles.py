import numpy as np
import pytest

from conveyor.bench.percentiles import percentile, summarize

# (samples, p, expected): nearest rank = the smallest sample with >= p% at or below it.
TABLE = [
    ([5.0], 50, 5.0),
    ([5.0], 99, 5.0),
    ([1.0, 2.0], 50, 1.0),
    ([1.0, 2.0], 51, 2.0),
    ([1.0, 2.0, 3.0, 4.0], 50, 2.0),
    ([1.0, 2.0, 3.0, 4.0], 75, 3.0),
    ([1.0, 2.0, 3.0, 4.0], 76, 4.0),
    ([float(i) for i in range(1, 11)], 90, 9.0),  # not 10: 0.9 * 10 is exactly rank 9
    ([float(i) for i in range(1, 11)], 91, 10.0),
    ([float(i) for i in range(1, 101)], 99, 99.0),
    ([float(i) for i in range(1, 101)], 100, 100.0),
    ([float(i) for i in range(1, 101)], 0, 1.0),
    ([float(i) for i in range(1, 1001)], 99, 990.0),
    ([float(i) for i in range(1, 1001)], 99.9, 999.0),
]


@pytest.mark.parametrize(("samples", "p", "expected"), TABLE)
def test_nearest_rank(samples, p, expected):
    assert percentile(samples, p) == expected


def test_percentile_rejects_nothing_and_out_of_range():
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 50)
    with pytest.raises(ValueError, match="within"):
        percentile([1.0], 101)


def test_summarize_converts_ns_to_ms_and_sorts():
    ns = np.array([4_000_000, 1_000_000, 3_000_000, 2_000_000], dtype=np.int64)
    s = summarize(ns)
    assert (s.count, s.p50, s.p90, s.p99, s.max) == (4, 2.0, 4.0, 4.0, 4.0)
    assert s.mean == pytest.approx(2.5)


def test_summarize_empty_is_all_none():
    s = summarize(np.array([], dtype=np.int64))
    assert s.count == 0
    assert s.p50 is s.p99 is s.max is s.mean is None
