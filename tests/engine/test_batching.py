"""Dynamic batching: requests queued together run as one execution and split back exactly."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from onnx import TensorProto, helper

from conveyor import Engine
from conveyor.examples import onnx_models
from tests.models import RepoBuilder


def scale_model(path):
    """OUTPUT0 = INPUT0 * 2 over FP32 [batch, n] (n any)."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "INPUT0"], ["OUTPUT0"])],
        "scale",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["B", "N"])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["B", "N"])],
    )
    return onnx_models._save(graph, path)


def batching_config(max_batch: int, delay_us: int, preferred: str = "") -> str:
    return f"""
    max_batch_size = {max_batch}
    instances = 1
    [dynamic_batching]
    max_queue_delay_us = {delay_us}
    {preferred}
    """


def submit_together(engine: Engine, arrays: list[np.ndarray]):
    """Submit from several threads at once, as concurrent clients would."""
    barrier = threading.Barrier(len(arrays))
    futures: list = [None] * len(arrays)

    def one(i: int) -> None:
        barrier.wait(5)
        futures[i] = engine.submit("scale", {"INPUT0": arrays[i]})

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(arrays))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return futures


def test_requests_are_batched_and_split_back_exactly(repo: RepoBuilder):
    repo.onnx("scale", scale_model, batching_config(8, 200_000))
    arrays = [np.full((1, 4), i, np.float32) for i in range(8)]
    with Engine.from_repository(repo.path) as engine:
        futures = submit_together(engine, arrays)
        for i, future in enumerate(futures):
            assert future.result(timeout=10)["OUTPUT0"].tolist() == [[2.0 * i] * 4]
        stats = engine.statistics("scale")[0]
    assert stats.inference_count == 8
    assert stats.execution_count < 8  # at least some requests shared an execution
    assert max(b.batch_size for b in stats.batch_stats) > 1


def test_multi_item_requests_keep_their_rows(repo: RepoBuilder):
    repo.onnx("scale", scale_model, batching_config(8, 200_000))
    arrays = [np.arange(k * 3, dtype=np.float32).reshape(k, 3) + 100 * k for k in (1, 2, 3)]
    with Engine.from_repository(repo.path) as engine:
        futures = submit_together(engine, arrays)
        for array, future in zip(arrays, futures, strict=True):
            np.testing.assert_array_equal(future.result(timeout=10)["OUTPUT0"], array * 2)


def test_requests_with_different_shapes_are_not_batched_together(repo: RepoBuilder):
    repo.onnx("scale", scale_model, batching_config(8, 100_000))
    arrays = [np.ones((1, 3), np.float32), np.ones((1, 5), np.float32)] * 2
    with Engine.from_repository(repo.path) as engine:
        futures = submit_together(engine, arrays)
        for array, future in zip(arrays, futures, strict=True):
            assert future.result(timeout=10)["OUTPUT0"].shape == array.shape
        stats = engine.statistics("scale")[0]
    assert stats.inference_count == 4
    assert stats.execution_count >= 2
    assert max(b.batch_size for b in stats.batch_stats) <= 2


def test_batches_never_exceed_max_batch_size(repo: RepoBuilder):
    repo.onnx("scale", scale_model, batching_config(4, 100_000))
    arrays = [np.ones((1, 2), np.float32)] * 10
    with Engine.from_repository(repo.path) as engine:
        for future in submit_together(engine, arrays):
            future.result(timeout=10)
        stats = engine.statistics("scale")[0]
    assert stats.inference_count == 10
    assert max(b.batch_size for b in stats.batch_stats) <= 4


def test_preferred_batch_sizes_shape_the_batches(repo: RepoBuilder):
    repo.onnx("scale", scale_model, batching_config(8, 300_000, "preferred_batch_sizes = [4]"))
    with Engine.from_repository(repo.path) as engine:
        # Queue six requests behind nothing: the batcher takes 4 (preferred), then 2.
        futures = [
            engine.submit("scale", {"INPUT0": np.ones((1, 2), np.float32)}) for _ in range(6)
        ]
        for future in futures:
            future.result(timeout=10)
        stats = engine.statistics("scale")[0]
    sizes = {b.batch_size: b.compute_infer.count for b in stats.batch_stats}
    assert sizes.get(4) == 1
    assert sum(size * count for size, count in sizes.items()) == 6


def test_a_lone_request_waits_at_most_the_queue_delay(repo: RepoBuilder):
    repo.onnx("scale", scale_model, batching_config(8, 50_000))
    with Engine.from_repository(repo.path) as engine:
        out = engine.submit("scale", {"INPUT0": np.ones((1, 2), np.float32)}).result(timeout=5)
        stats = engine.statistics("scale")[0]
    assert out["OUTPUT0"].tolist() == [[2.0, 2.0]]
    assert stats.queue.ns < 2_000_000_000


@pytest.mark.parametrize("size", [0, 9])
def test_batch_size_outside_one_to_max_is_refused(repo: RepoBuilder, size: int):
    import conveyor

    repo.onnx("scale", scale_model, batching_config(8, 1000))
    with (
        Engine.from_repository(repo.path) as engine,
        pytest.raises(conveyor.InvalidInput, match="batch size"),
    ):
        engine.submit("scale", {"INPUT0": np.ones((size, 2), np.float32)})


def test_batched_results_equal_unbatched_results():
    """mlp (dynamic batching on) gives every request the rows it would get alone."""
    rng = np.random.default_rng(3)
    rows = [rng.standard_normal((1, 256)).astype(np.float32) for _ in range(32)]
    with Engine.from_repository() as engine:
        alone = [engine.submit("mlp", {"INPUT0": r}).result(10)["OUTPUT0"] for r in rows]
        futures = [engine.submit("mlp", {"INPUT0": r}) for r in rows]
        together = [f.result(10)["OUTPUT0"] for f in futures]
        stats = engine.statistics("mlp")[0]
    for a, b in zip(alone, together, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    assert max(b.batch_size for b in stats.batch_stats) > 1
