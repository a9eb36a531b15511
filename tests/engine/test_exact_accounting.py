"""What the hot path does more cheaply still adds up exactly: the statistics of executions
(summed per execution now, not added per request) and a future's completion stamp (read
from its state under one lock)."""

from __future__ import annotations

from concurrent.futures import InvalidStateError

import pytest

from conveyor.engine.stats import Duration, StatsRecorder
from conveyor.futures import InferFuture


def test_executions_add_up_to_the_requests_they_held():
    stats = StatsRecorder("m", 1)
    stats.record_execution([10, 20, 30], [100, 200, 300], 5, input_ns=1, infer_ns=7, output_ns=2)
    stats.record_execution([4], [40], 1, input_ns=3, infer_ns=5, output_ns=1)
    stats.record_execution([6, 8], [60, 80], 5, input_ns=2, infer_ns=9, output_ns=4)
    snap = stats.snapshot(pending=0)
    assert snap.inference_count == 11 and snap.execution_count == 3
    assert snap.queue == Duration(6, 10 + 20 + 30 + 4 + 6 + 8)
    assert snap.success == Duration(6, 100 + 200 + 300 + 40 + 60 + 80)
    # Each request is charged its execution's whole compute time, as in Triton.
    assert snap.compute_input == Duration(6, 3 * 1 + 3 + 2 * 2)
    assert snap.compute_infer == Duration(6, 3 * 7 + 5 + 2 * 9)
    assert snap.compute_output == Duration(6, 3 * 2 + 1 + 2 * 4)
    by_size = {b.batch_size: b for b in snap.batch_stats}
    assert sorted(by_size) == [1, 5]
    assert by_size[5].compute_infer == Duration(2, 7 + 9)
    assert by_size[1].compute_input == Duration(1, 3)
    assert snap.last_inference_ms > 0


def test_mismatched_request_times_are_refused():
    with pytest.raises(ValueError, match="2 queue times but 1 total times"):
        StatsRecorder("m", 1).record_execution([1, 2], [3], 2, 0, 0, 0)


def test_a_future_is_stamped_once_by_its_first_answer():
    future = InferFuture()
    future.set_running_or_notify_cancel()
    future.set_result({})
    stamp = future.completion_seq
    assert stamp >= 0
    with pytest.raises(InvalidStateError):
        future.set_exception(RuntimeError("late"))
    with pytest.raises(InvalidStateError):
        future.set_result({})
    assert future.completion_seq == stamp


def test_a_cancelled_future_keeps_its_cancellation_stamp():
    future = InferFuture()
    assert future.cancel()
    stamp = future.completion_seq
    assert stamp >= 0
    # An instance thread answering it later (it was taken just as it was cancelled) is
    # refused, and the stamp stays the cancellation's.
    with pytest.raises(InvalidStateError):
        future.set_exception(RuntimeError("after the cancel"))
    with pytest.raises(InvalidStateError):
        future.set_result({})
    assert future.completion_seq == stamp


def test_failures_are_stamped_like_results():
    first, second = InferFuture(), InferFuture()
    first.set_exception(RuntimeError("x"))
    second.set_result({})
    assert 0 <= first.completion_seq < second.completion_seq
