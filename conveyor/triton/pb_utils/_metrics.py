"""Custom metrics: ``MetricFamily`` and its ``Metric`` series, served on ``/metrics``."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Mapping, Sequence

from conveyor.backends.custom_metrics import (
    CUSTOM_METRICS,
    Action,
    Kind,
    KindMismatch,
    Labels,
    Update,
)
from conveyor.triton.pb_utils._errors import TritonModelException


class MetricFamily:
    """A named metric of one kind; ``Metric(labels)`` is one of its series.

    Families are shared by name: a second ``MetricFamily`` of the same name and kind is the
    same family (the first description stays); of another kind it raises. When every
    ``MetricFamily`` object of a name is deleted, the family leaves ``/metrics`` and its
    metrics raise on use, as in Triton.
    """

    COUNTER = Kind.COUNTER
    GAUGE = Kind.GAUGE
    HISTOGRAM = Kind.HISTOGRAM

    def __init__(self, name: str, description: str, kind: Kind) -> None:
        if kind not in (Kind.COUNTER, Kind.GAUGE, Kind.HISTOGRAM):
            raise TritonModelException(
                f"MetricFamily {name!r}: kind {kind!r}; expected MetricFamily.COUNTER, "
                "GAUGE or HISTOGRAM"
            )
        if not isinstance(name, str) or not name or not _metric_name(name):
            raise TritonModelException(
                f"MetricFamily: name {name!r} is not a Prometheus metric name "
                "([a-zA-Z_:][a-zA-Z0-9_:]*)"
            )
        try:
            CUSTOM_METRICS.apply(Update(name, Action.HOLD, Kind(kind), str(description)))
        except KindMismatch as exc:
            raise TritonModelException(f"MetricFamily: {exc}") from None
        self._name = name
        self._kind = Kind(kind)

    def Metric(
        self, labels: Mapping[str, str] | None = None, buckets: Sequence[float] | None = None
    ) -> Metric:
        return Metric(self._name, self._kind, labels or {}, buckets)

    def __del__(self) -> None:
        name = getattr(self, "_name", None)
        if name is not None:
            with contextlib.suppress(Exception):  # at interpreter exit the store may be gone
                CUSTOM_METRICS.apply(Update(name, Action.RELEASE))


def _metric_name(name: str) -> bool:
    head, rest = name[0], name[1:]
    return (head.isascii() and (head.isalpha() or head in "_:")) and all(
        c.isascii() and (c.isalnum() or c in "_:") for c in rest
    )


_DELETED = "Invalid metric operation as the corresponding 'MetricFamily' has been deleted."


class Metric:
    """One series of a family: ``increment``, ``set`` (gauges), ``observe`` (histograms),
    ``value`` (counters and gauges). Metrics with the same family and labels share a value."""

    def __init__(
        self,
        family: str,
        kind: Kind,
        labels: Mapping[str, str],
        buckets: Sequence[float] | None = None,
    ) -> None:
        self._family = family
        self._kind = kind
        self._labels: Labels = tuple(sorted((str(k), str(v)) for k, v in labels.items()))
        if kind is Kind.HISTOGRAM:
            if buckets is None:
                raise TritonModelException(
                    f"Metric of histogram family {family!r}: buckets are required "
                    "(a list of increasing upper bounds; [] for none)"
                )
            bounds = tuple(float(b) for b in buckets)
            if any(nxt <= prev for prev, nxt in itertools.pairwise(bounds)):
                raise TritonModelException(
                    f"Metric of histogram family {family!r}: buckets {list(buckets)} must be "
                    "strictly increasing"
                )
        elif buckets is not None:
            raise TritonModelException(
                f"Metric of {kind} family {family!r}: buckets are for histograms only"
            )
        else:
            bounds = None
        self._update(Action.CREATE, 0.0, bounds)

    def _update(
        self, action: Action, value: float, buckets: tuple[float, ...] | None = None
    ) -> None:
        if not CUSTOM_METRICS.alive(self._family):
            raise TritonModelException(_DELETED)
        CUSTOM_METRICS.apply(
            Update(self._family, action, self._kind, "", self._labels, value, buckets)
        )

    def increment(self, value: float) -> None:
        if self._kind is Kind.HISTOGRAM:
            raise TritonModelException(
                f"Metric of histogram family {self._family!r}: increment() is for counters "
                "and gauges; use observe()"
            )
        if self._kind is Kind.COUNTER and value < 0:
            raise TritonModelException(
                f"Metric of counter family {self._family!r}: increment({value}) must not be "
                "negative; a counter only goes up"
            )
        self._update(Action.INCREMENT, float(value))

    def set(self, value: float) -> None:
        if self._kind is not Kind.GAUGE:
            raise TritonModelException(
                f"Metric of {self._kind} family {self._family!r}: set() is for gauges only"
            )
        self._update(Action.SET, float(value))

    def observe(self, value: float) -> None:
        if self._kind is not Kind.HISTOGRAM:
            raise TritonModelException(
                f"Metric of {self._kind} family {self._family!r}: observe() is for histograms only"
            )
        self._update(Action.OBSERVE, float(value))

    def value(self) -> float:
        if self._kind is Kind.HISTOGRAM:
            raise TritonModelException(
                f"Metric of histogram family {self._family!r}: value() is for counters and "
                "gauges; a histogram is read on /metrics"
            )
        value = CUSTOM_METRICS.value(self._family, self._labels)
        if value is None:
            raise TritonModelException(_DELETED)
        return value
