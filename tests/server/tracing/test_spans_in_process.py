"""trace_mode opentelemetry in process: the HTTP routes over a real engine, spans read from
the SDK's in-memory exporter. The span tree, its attributes, the client's traceparent
continued, and the missing-extra error."""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from conveyor.engine import Engine
from conveyor.errors import InvalidInput
from conveyor.server.dataplane import DataPlane
from conveyor.server.http.routes import V2Routes
from conveyor.server.settings import Settings
from conveyor.server.tracing.otel import OTelSink
from conveyor.server.tracing.settings import TraceLevel, TraceMode, TraceSettings
from conveyor.server.tracing.tracer import Tracer

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN = "00f067aa0ba902b7"
BODY = json.dumps(
    {
        "id": "request-7",
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": [0.0] * 16}],
    }
).encode()


@pytest.fixture(scope="module")
def engine(repository: Path) -> Iterator[Engine]:
    with Engine.from_repository(repository) as running:
        yield running


@pytest.fixture
def traced(engine: Engine) -> tuple[V2Routes, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    settings = TraceSettings(
        trace_level=(TraceLevel.TIMESTAMPS,), trace_rate=1, trace_mode=TraceMode.OPENTELEMETRY
    )
    tracer = Tracer(settings, otel_sink=OTelSink(exporter, batch=False))
    return V2Routes(DataPlane(engine, version="test", tracer=tracer)), exporter


def answer(routes: V2Routes, model: str, traceparent: bytes | None = None) -> dict[str, Any]:
    pending = routes.begin_infer(f"/v2/models/{model}/infer", BODY, None, traceparent)
    status, body, _ = pending.reply(pending.future.result(timeout=10))
    assert status == 200
    return dict(json.loads(body))


def by_name(exporter: InMemorySpanExporter) -> dict[str, Any]:
    spans = exporter.get_finished_spans()
    named = {span.name: span for span in spans}
    assert len(named) == len(spans), [s.name for s in spans]
    return named


@pytest.mark.parametrize("model", ["tiny", "batched"])
def test_spans_of_one_request(traced: tuple[V2Routes, InMemorySpanExporter], model: str) -> None:
    routes, exporter = traced
    assert answer(routes, model)["id"] == "request-7"
    spans = by_name(exporter)
    # send, and batch formation on the model that batches dynamically, were added since.
    added = {"send", "batch_formation"} if model == "batched" else {"send"}
    assert set(spans) == {
        "infer", "decode", "queue", "compute", "compute_input", "compute_infer",
        "compute_output", "encode",
    } | added  # fmt: skip
    root = spans["infer"]
    assert root.parent is None
    assert root.attributes["model_name"] == model
    assert root.attributes["model_version"] == "1"
    assert root.attributes["request_id"] == "request-7"
    assert root.attributes["batch_size"] == 1
    assert root.attributes["protocol"] == "http"
    for name in ("decode", "queue", "compute", "encode"):
        assert spans[name].parent.span_id == root.context.span_id, name
    for name in ("compute_input", "compute_infer", "compute_output"):
        assert spans[name].parent.span_id == spans["compute"].context.span_id, name
    # One trace, each step inside its parent, steps in order.
    assert {span.context.trace_id for span in spans.values()} == {root.context.trace_id}
    steps = ["decode", "queue", "compute_input", "compute_infer", "compute_output", "encode"]
    for earlier, later in itertools.pairwise(steps):
        assert spans[earlier].end_time <= spans[later].start_time, (earlier, later)
    assert root.start_time <= spans["decode"].start_time
    assert spans["encode"].end_time <= root.end_time
    events = [event.name for event in root.events]
    assert events[events.index("QUEUE_START") :][:2] == ["QUEUE_START", "COMPUTE_START"]


def test_traceparent_continues_the_client_trace(
    traced: tuple[V2Routes, InMemorySpanExporter],
) -> None:
    routes, exporter = traced
    answer(routes, "tiny", f"00-{TRACE_ID}-{PARENT_SPAN}-01".encode())
    root = by_name(exporter)["infer"]
    assert format(root.context.trace_id, "032x") == TRACE_ID
    assert format(root.parent.span_id, "016x") == PARENT_SPAN
    assert root.parent.is_remote


def test_rate_traces_one_request_of_n(traced: tuple[V2Routes, InMemorySpanExporter]) -> None:
    routes, exporter = traced
    routes.data.update_trace_settings(None, {"trace_rate": "3"})
    for _ in range(6):
        answer(routes, "tiny")
    assert sum(span.name == "infer" for span in exporter.get_finished_spans()) == 2


def test_tracing_off_takes_no_trace(traced: tuple[V2Routes, InMemorySpanExporter]) -> None:
    routes, exporter = traced
    routes.data.update_trace_settings(None, {"trace_level": ["OFF"]})
    assert not routes.data.tracer.on
    answer(routes, "tiny")
    assert exporter.get_finished_spans() == ()


def test_without_the_extra_opentelemetry_is_refused_naming_it(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if not installed
    data = DataPlane(engine, version="test")
    with pytest.raises(InvalidInput, match=r"pip install '\.\[tracing\]'"):
        data.update_trace_settings(
            None, {"trace_mode": "opentelemetry", "trace_level": "TIMESTAMPS"}
        )
    assert data.trace_settings(None)["trace_mode"] == "triton"  # nothing was changed
    with pytest.raises(ValueError, match=r"pip install '\.\[tracing\]'"):
        Settings(trace_config=("mode=opentelemetry", "level=TIMESTAMPS"))
