"""Which requests are traced, what each trace records, and where a finished trace goes.

A front end asks :meth:`Tracer.begin` for a trace only when ``tracer.on`` is true (that
attribute read is all tracing costs while it is off). A sampled request gets a
:class:`RequestTrace`; the front end stamps its own moments on it (read started and
ended, decoded, answered, send started and ended), the engine stamps the queue, batch
formation and compute times on its ``timeline`` (the readings its statistics come from),
and :meth:`Tracer.finish` hands the whole trace to the sink of the trace mode in effect:
Triton's JSON file (``triton_file.py``) or OpenTelemetry spans (``otel.py``).

Every timestamp is ``time.perf_counter_ns()`` (a monotonic clock, as Triton's steady-clock
nanoseconds); the OpenTelemetry sink moves them to wall-clock time when it builds spans.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Mapping

from conveyor.errors import InvalidInput
from conveyor.server.tracing.settings import (
    SettingValue,
    TraceMode,
    TraceSettings,
    TraceSettingsStore,
)
from conveyor.server.tracing.trace import RequestTrace, TraceSink
from conveyor.server.tracing.triton_file import TritonTraceFile

log = logging.getLogger("conveyor.server.tracing")


class Tracer:
    """The trace settings, the sampling, and the sinks. Off (Triton's default) until a
    trace_level other than OFF is set, globally or for a model."""

    def __init__(
        self,
        settings: TraceSettings | None = None,
        *,
        otel_sink: TraceSink | None = None,
        otel_endpoint: str | None = None,
    ) -> None:
        """``otel_sink``: where opentelemetry-mode traces go; None builds the OTLP exporter
        (from the OTEL_* environment, ``otel_endpoint`` overriding their endpoint) the first
        time that mode is used."""
        self._store = TraceSettingsStore(settings or TraceSettings())
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        # Per model: its rate and how many requests it has seen; rebuilt after a change.
        self._samplers: dict[str, _Sampler] = {}
        self._files: dict[str, TritonTraceFile] = {}
        self._otel = otel_sink
        self._otel_endpoint = otel_endpoint
        self.on = False
        self._check_usable(self._store.effective(None))
        self._refresh()

    # -- settings (the trace extension) -----------------------------------------------------

    def settings(self, model: str | None) -> dict[str, str | list[str]]:
        return self._store.effective(model).as_protocol()

    def update(
        self, model: str | None, changes: Mapping[str, SettingValue]
    ) -> dict[str, str | list[str]]:
        with self._lock:
            saved = self._store.saved()
            updated = self._store.update(model, changes)
            try:
                self._check_usable(updated)
            except InvalidInput:
                self._store.restore(saved)  # settings that cannot run are not kept
                raise
            self._samplers.clear()  # as Triton: new settings count the rate from the next request
            self._refresh()
        return updated.as_protocol()

    def _check_usable(self, settings: TraceSettings) -> None:
        if settings.on and settings.trace_mode is TraceMode.OPENTELEMETRY:
            self._otel_sink()
        if settings.on and settings.trace_mode is TraceMode.TRITON and not settings.trace_file:
            raise InvalidInput(
                "trace setting 'trace_file' must name a file for trace_mode triton while "
                "trace_level is not OFF; start the server with --trace-config triton,file=PATH"
            )

    def _refresh(self) -> None:
        self.on = self._store.any_on()

    # -- per request ------------------------------------------------------------------------

    def begin(self, model: str, protocol: str, traceparent: str | None) -> RequestTrace | None:
        """A trace for this request if it is sampled (1 of every trace_rate, while
        trace_count lasts), else None. ``traceparent``: the client's W3C header, if any.

        Every request of a model being traced comes here, so a request that is not sampled
        pays only a dict lookup and a counter (``next`` on an ``itertools.count`` is atomic:
        no lock); the lock is taken for a sampled one, to spend the trace_count."""
        sampler = self._samplers.get(model)
        if sampler is None:
            sampler = self._sampler(model)
        if sampler.rate == 0 or next(sampler.seen) % sampler.rate:
            return None
        received = time.perf_counter_ns()
        with self._lock:
            settings = self._store.effective(model)
            if not settings.on or settings.trace_count == 0:
                return None
            if settings.trace_count > 0:
                self._store.set_count(model, settings.trace_count - 1)
                if settings.trace_count == 1:
                    self._samplers.clear()  # the count is spent: stop counting requests
            trace_id = next(self._ids)
        return RequestTrace(trace_id, model, protocol, traceparent, settings, received)

    def _sampler(self, model: str) -> _Sampler:
        with self._lock:
            settings = self._store.effective(model)
            traced = settings.on and settings.trace_count != 0
            sampler = _Sampler(settings.trace_rate if traced else 0)
            return self._samplers.setdefault(model, sampler)

    def finish(self, trace: RequestTrace) -> None:
        """The response was handed to the transport (or the call ended): record the trace,
        ``sent`` (*_SEND_END) now. A trace that cannot be written is logged, never the
        request's failure."""
        trace.sent = time.perf_counter_ns()
        if not trace.send_start:  # an error answer: timed only as it is handed over
            trace.send_start = trace.sent
        settings = trace.settings
        try:
            if settings.trace_mode is TraceMode.OPENTELEMETRY:
                self._otel_sink().record(trace)
                return
            with self._lock:
                file = self._files.get(settings.trace_file)
                if file is None:
                    file = TritonTraceFile(settings.trace_file)
                    self._files[settings.trace_file] = file
            file.record(trace, settings.log_frequency, self._ids)
        except Exception:
            log.exception("trace %d of model %r could not be recorded", trace.id, trace.model)

    def end_stream(
        self, trace: RequestTrace, version: str | None, request_id: str | None, ok: bool
    ) -> None:
        """A streamed request ended (``ok``: its last response was handed to the stream's
        writer): REQUEST_END and the send timestamps now, and record the trace."""
        trace.version = version or ""
        trace.request_id = request_id or ""
        if ok:
            trace.answered = trace.send_start = time.perf_counter_ns()
        self.finish(trace)

    def _otel_sink(self) -> TraceSink:
        if self._otel is None:
            from conveyor.server.tracing.otel import OTelSink  # the optional extra

            self._otel = OTelSink.from_environment(self._otel_endpoint)
        return self._otel

    def close(self) -> None:
        """At shutdown: write what the trace files still hold, flush the spans."""
        with self._lock:
            files = list(self._files.values())
        for file in files:
            file.close()
        if self._otel is not None:
            self._otel.close()


class _Sampler:
    """One model's sampling: trace 1 request of every ``rate`` (0: none)."""

    __slots__ = ("rate", "seen")

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self.seen = itertools.count(1)
