"""Prometheus metrics, read from the engine's statistics at scrape time (served by
``metrics_port.py``).

The engine never creates metric objects: a custom collector turns
``engine.statistics()`` into Triton's metric families when Prometheus scrapes, so existing
Triton dashboards work. The one thing the engine does not keep is a latency distribution;
the front ends record it in :class:`LatencyHistograms` (a lock and a bucket increment per
request).

Triton's counters have no ``_total`` suffix; we keep their exact names (text format 0.0.4).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from conveyor.backends.custom_metrics import CUSTOM_METRICS, CustomMetrics, Kind

if TYPE_CHECKING:
    from conveyor.engine import Engine
    from conveyor.engine.stats import ModelStatistics

LABELS = ("model", "version")

# (metric name, help, how to read it from ModelStatistics); durations become microseconds.
COUNTERS: tuple[tuple[str, str, Callable[[ModelStatistics], int]], ...] = (
    ("nv_inference_request_success", "Number of successful inference requests, all batch sizes",
     lambda s: s.success.count),
    ("nv_inference_request_failure", "Number of failed inference requests, all batch sizes",
     lambda s: s.fail.count),
    ("nv_inference_count", "Number of inferences performed (a batch of n counts n)",
     lambda s: s.inference_count),
    ("nv_inference_exec_count", "Number of model executions performed (a batch counts once)",
     lambda s: s.execution_count),
    ("nv_inference_request_duration_us", "Cumulative inference request duration in microseconds",
     lambda s: (s.success.ns + s.fail.ns) // 1000),
    ("nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds",
     lambda s: s.queue.ns // 1000),
    ("nv_inference_compute_input_duration_us",
     "Cumulative compute input duration in microseconds", lambda s: s.compute_input.ns // 1000),
    ("nv_inference_compute_infer_duration_us",
     "Cumulative compute inference duration in microseconds",
     lambda s: s.compute_infer.ns // 1000),
    ("nv_inference_compute_output_duration_us",
     "Cumulative inference compute output duration in microseconds",
     lambda s: s.compute_output.ns // 1000),
    # Conveyor's own (Triton has none), named like Triton's (no "_total"): a ragged batch's
    # padding waste is padding / (padding + real), summed over the model's ragged inputs;
    # both stay 0 for a model without ragged inputs.
    ("conveyor_ragged_padding_elements",
     "Zeros added to pad ragged inputs to an execution's widest request",
     lambda s: s.ragged_padding_elements),
    ("conveyor_ragged_real_elements",
     "Elements of ragged inputs that requests sent (each execution, batched or alone)",
     lambda s: s.ragged_real_elements),
)  # fmt: skip

PENDING = "nv_inference_pending_request_count"
LATENCY = "conveyor_inference_request_duration_seconds"
LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
)  # fmt: skip


class LatencyHistograms:
    """End-to-end request latency as the front ends see it, per model, version, protocol."""

    def __init__(self, buckets: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.buckets = buckets
        self._lock = threading.Lock()
        # (model, version, protocol) -> [count per bucket (+Inf last), sum]
        self._series: dict[tuple[str, str, str], tuple[list[int], list[float]]] = {}

    def observe(self, model: str, version: str, seconds: float, protocol: str = "http") -> None:
        index = bisect.bisect_left(self.buckets, seconds)
        key = (model, version, protocol)
        with self._lock:
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = ([0] * (len(self.buckets) + 1), [0.0])
            series[0][index] += 1
            series[1][0] += seconds

    def counts(self) -> dict[tuple[str, str], list[int]]:
        """Count per bucket (+Inf last) per (model, version), every protocol together."""
        with self._lock:
            series = [(key, list(c)) for key, (c, _) in self._series.items()]
        merged: dict[tuple[str, str], list[int]] = {}
        for (model, version, _), counts in series:
            into = merged.setdefault((model, version), [0] * len(counts))
            for index, count in enumerate(counts):
                into[index] += count
        return merged

    def family(self) -> HistogramMetricFamily:
        family = HistogramMetricFamily(
            LATENCY,
            "Inference request latency as the front end sees it (receive to response)",
            labels=(*LABELS, "protocol"),
        )
        with self._lock:
            series = [(key, list(c), total[0]) for key, (c, total) in self._series.items()]
        for key, counts, total in sorted(series):
            cumulative, running = [], 0
            for bound, count in zip((*self.buckets, float("inf")), counts, strict=True):
                running += count
                cumulative.append((_bound(bound), running))
            family.add_metric(list(key), cumulative, total)
        return family


def quantile(buckets: tuple[float, ...], counts: list[int], q: float) -> float | None:
    """The ``q`` quantile of bucketed counts (+Inf last), interpolated inside its bucket
    as Prometheus' ``histogram_quantile`` does; None with no observations."""
    total = sum(counts)
    if total == 0:
        return None
    rank = q * total
    running = 0
    for index, count in enumerate(counts):
        if count and running + count >= rank:
            if index == len(buckets):  # +Inf: all we know is "above the last bound"
                return buckets[-1]
            lower = buckets[index - 1] if index else 0.0
            return lower + (buckets[index] - lower) * (rank - running) / count
        running += count
    return buckets[-1]


def _bound(value: float) -> str:
    return "+Inf" if value == float("inf") else repr(value)


class EngineCollector:
    """Reads the engine's statistics (and the latency histograms) at each scrape."""

    def __init__(
        self, engine: Callable[[], Engine | None], histograms: LatencyHistograms | None
    ) -> None:
        self._engine = engine
        self._histograms = histograms

    def collect(self) -> Iterator[Metric]:
        engine = self._engine()
        stats = engine.statistics() if engine is not None else []
        for name, documentation, read in COUNTERS:
            # A plain Metric keeps Triton's exact sample name (no "_total" suffix).
            metric = Metric(name, documentation, "counter")
            for s in stats:
                metric.add_sample(name, _labels(s), read(s))
            yield metric
        pending = Metric(PENDING, "Instantaneous number of pending requests", "gauge")
        for s in stats:
            pending.add_sample(PENDING, _labels(s), s.pending)
        yield pending
        if self._histograms is not None:
            yield self._histograms.family()


def _labels(stats: ModelStatistics) -> dict[str, str]:
    return {"model": stats.name, "version": str(stats.version)}


class CustomCollector:
    """The metric families models defined (Triton's ``pb_utils.MetricFamily``), read from
    the process's store at each scrape. A family named like one of Conveyor's own is left
    out: the built-in one keeps its name."""

    BUILT_IN = frozenset({name for name, _, _ in COUNTERS} | {PENDING, LATENCY})

    def __init__(self, store: CustomMetrics = CUSTOM_METRICS) -> None:
        self._store = store

    def collect(self) -> Iterator[Metric]:
        for family in self._store.snapshot():
            if family.name in self.BUILT_IN:
                continue
            metric = Metric(family.name, family.description, str(family.kind))
            for series in family.series:
                labels = dict(series.labels)
                if family.kind is not Kind.HISTOGRAM:
                    metric.add_sample(family.name, labels, series.value)
                    continue
                bounds = [*(_le(b) for b in series.buckets), "+Inf"]
                for bound, count in zip(bounds, series.cumulative, strict=True):
                    metric.add_sample(f"{family.name}_bucket", {**labels, "le": bound}, count)
                metric.add_sample(f"{family.name}_sum", labels, series.sum)
                metric.add_sample(f"{family.name}_count", labels, series.count)
            yield metric


def _le(bound: float) -> str:
    # Triton writes whole bounds without ".0" (le="1", le="2.5").
    text = repr(bound)
    return text.removesuffix(".0")


def registry(
    engine: Callable[[], Engine | None], histograms: LatencyHistograms | None
) -> CollectorRegistry:
    result = CollectorRegistry(auto_describe=False)
    result.register(EngineCollector(engine, histograms))
    result.register(CustomCollector())
    return result


def exposition(metrics_registry: CollectorRegistry) -> bytes:
    """The registry in Prometheus text format 0.0.4, each family under its own name.

    prometheus_client's ``generate_latest`` names a counter family ``<name>_total`` on its
    HELP and TYPE lines; Triton's counters have no ``_total``, so their samples would not
    belong to the family the lines declare (a parser would see them untyped).
    """
    out: list[str] = []
    for family in metrics_registry.collect():
        documentation = family.documentation.replace("\\", r"\\").replace("\n", r"\n")
        out.append(f"# HELP {family.name} {documentation}\n# TYPE {family.name} {family.type}\n")
        for sample in family.samples:
            labels = ",".join(
                f'{name}="{_escape_label(value)}"' for name, value in sorted(sample.labels.items())
            )
            braces = f"{{{labels}}}" if labels else ""
            out.append(f"{sample.name}{braces} {floatToGoString(sample.value)}\n")
    return "".join(out).encode()


def _escape_label(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
