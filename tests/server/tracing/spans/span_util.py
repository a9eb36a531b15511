"""Exported spans read back per request, and the inputs of the decoupled ``repeat`` model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient

from tests.polling import wait_until
from tests.server.tracing.otlp_receiver import Received


class Span:
    """One exported span, its ids as hex and its attributes as a dict."""

    def __init__(self, proto: Any) -> None:
        self.name: str = proto.name
        self.trace_id: str = proto.trace_id.hex()
        self.span_id: str = proto.span_id.hex()
        self.parent: str = proto.parent_span_id.hex()
        self.start: int = proto.start_time_unix_nano
        self.end: int = proto.end_time_unix_nano
        self.events: list[str] = [event.name for event in proto.events]
        self.error = proto.status.code == 2  # STATUS_CODE_ERROR
        self.attributes: dict[str, Any] = {}
        for attribute in proto.attributes:
            kind = attribute.value.WhichOneof("value")
            self.attributes[attribute.key] = getattr(attribute.value, kind)


class RequestSpans:
    """The spans of one traced request: its ``infer`` root and every span under it."""

    def __init__(self, root: Span, all_spans: list[Span]) -> None:
        self.root = root
        in_trace = [s for s in all_spans if s.trace_id == root.trace_id]
        self.under: list[Span] = []
        parents = {root.span_id}
        grew = True
        while grew:  # every descendant of the root, whatever its depth
            grew = False
            for span in in_trace:
                if span.parent in parents and span not in self.under:
                    self.under.append(span)
                    parents.add(span.span_id)
                    grew = True

    def children(self, of: Span | None = None) -> dict[str, Span]:
        parent = (of or self.root).span_id
        named = [s for s in self.under if s.parent == parent]
        by_name = {s.name: s for s in named}
        assert len(by_name) == len(named), [s.name for s in named]
        return by_name


def spans_of(received: Received, count: int, match: Callable[[Span], bool]) -> list[RequestSpans]:
    """Wait for ``count`` requests' ``infer`` spans that ``match``; their spans, in the
    order the requests were received."""

    def roots() -> list[Span]:
        spans = [Span(proto) for _, proto in received.snapshot()]
        return [s for s in spans if s.name == "infer" and match(s)]

    wait_until(lambda: len(roots()) >= count, timeout=30, what=f"{count} infer spans")
    found = roots()
    assert len(found) == count, [s.attributes for s in found]
    # The root ends after every span under it, so those were exported with it or before.
    every = [Span(proto) for _, proto in received.snapshot()]
    return [RequestSpans(root, every) for root in sorted(found, key=lambda s: s.start)]


def repeat_inputs(count: int) -> list[grpcclient.InferInput]:
    inputs = []
    for name, value in (("COUNT", count), ("DELAY_MS", 1)):
        tensor = grpcclient.InferInput(name, [1], "INT32")
        tensor.set_data_from_numpy(np.array([value], np.int32))
        inputs.append(tensor)
    return inputs
