"""Metrics a model defines itself (Triton's ``pb_utils.MetricFamily``), kept as values.

Model code changes them through ``conveyor.triton.pb_utils``; the metrics port reads
:meth:`CustomMetrics.snapshot` at each scrape and prints them beside Conveyor's own, so
nothing here knows about Prometheus. One store per process (:data:`CUSTOM_METRICS`), as
Triton keeps one registry per server.

Every change is an :class:`Update` value applied under one lock. In a worker process (process
instances) the store also keeps each update in its ``outbox``; the worker sends them to the
engine process with its next reply, where they are applied to the engine's store, so a
scrape sees every worker's counts. A worker's own reads (``value()``) see its own copy.
"""

from __future__ import annotations

import bisect
import dataclasses
import enum
import threading

Labels = tuple[tuple[str, str], ...]  # sorted (name, value) pairs


class Kind(enum.StrEnum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


class Action(enum.StrEnum):
    HOLD = "hold"  # a MetricFamily object was made for the family (made if new)
    RELEASE = "release"  # one was deleted; the family goes when none is left
    CREATE = "create"  # a Metric for these labels (zero if new)
    INCREMENT = "increment"
    SET = "set"
    OBSERVE = "observe"


@dataclasses.dataclass(frozen=True, slots=True)
class Update:
    family: str
    action: Action
    kind: Kind = Kind.COUNTER
    description: str = ""
    labels: Labels = ()
    value: float = 0.0
    buckets: tuple[float, ...] | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class SeriesValue:
    """One metric (a family's labels) at a scrape: ``value`` for counters and gauges;
    for a histogram the upper bounds, the count at or below each (cumulative), sum, count."""

    labels: Labels
    value: float = 0.0
    buckets: tuple[float, ...] = ()
    cumulative: tuple[int, ...] = ()
    sum: float = 0.0
    count: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class FamilyValue:
    name: str
    description: str
    kind: Kind
    series: tuple[SeriesValue, ...]


class KindMismatch(ValueError):
    """A family of that name exists with another kind."""


@dataclasses.dataclass(slots=True)
class _Series:
    value: float = 0.0
    buckets: tuple[float, ...] = ()
    counts: list[int] = dataclasses.field(default_factory=list)  # per bucket, +Inf last
    sum: float = 0.0
    count: int = 0


@dataclasses.dataclass(slots=True)
class _Family:
    description: str
    kind: Kind
    holders: int = 0
    series: dict[Labels, _Series] = dataclasses.field(default_factory=dict)


class CustomMetrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._families: dict[str, _Family] = {}
        self.outbox: list[Update] | None = None  # a worker's updates not yet sent

    def apply(self, update: Update) -> None:
        """Make the change ``update`` describes; KindMismatch if it names a family of
        another kind. Updates for a family that is gone are dropped."""
        with self._lock:
            self._apply(update)
            if self.outbox is not None:
                self.outbox.append(update)

    def take_outbox(self) -> list[Update]:
        with self._lock:
            taken, self.outbox = (self.outbox or []), ([] if self.outbox is not None else None)
        return taken

    def _apply(self, update: Update) -> None:
        family = self._families.get(update.family)
        if update.action is Action.HOLD:
            if family is None:
                family = self._families[update.family] = _Family(update.description, update.kind)
            elif family.kind is not update.kind:
                raise KindMismatch(
                    f"metric family {update.family!r} exists as a {family.kind}, "
                    f"not a {update.kind}"
                )
            family.holders += 1
            return
        if family is None:
            return
        if update.action is Action.RELEASE:
            family.holders -= 1
            if family.holders <= 0:
                del self._families[update.family]
            return
        series = family.series.get(update.labels)
        if series is None:
            buckets = update.buckets or ()
            series = family.series[update.labels] = _Series(
                buckets=buckets, counts=[0] * (len(buckets) + 1)
            )
        if update.action is Action.INCREMENT:
            series.value += update.value
        elif update.action is Action.SET:
            series.value = update.value
        elif update.action is Action.OBSERVE:
            series.counts[bisect.bisect_left(series.buckets, update.value)] += 1
            series.sum += update.value
            series.count += 1

    def alive(self, family: str) -> bool:
        with self._lock:
            return family in self._families

    def value(self, family: str, labels: Labels) -> float | None:
        """A counter's or gauge's value; None when the family is gone."""
        with self._lock:
            found = self._families.get(family)
            if found is None:
                return None
            series = found.series.get(labels)
            return series.value if series is not None else 0.0

    def snapshot(self) -> tuple[FamilyValue, ...]:
        with self._lock:
            return tuple(
                FamilyValue(
                    name,
                    family.description,
                    family.kind,
                    tuple(_series_value(labels, s) for labels, s in family.series.items()),
                )
                for name, family in self._families.items()
            )


def _series_value(labels: Labels, series: _Series) -> SeriesValue:
    cumulative, running = [], 0
    for count in series.counts:
        running += count
        cumulative.append(running)
    return SeriesValue(
        labels, series.value, series.buckets, tuple(cumulative), series.sum, series.count
    )


CUSTOM_METRICS = CustomMetrics()
