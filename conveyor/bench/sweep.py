"""A sweep: the points of one ``conveyor bench`` run, closed loop or open loop.

The command line describes every point at once (``-c 1,4,16`` or ``-r 100,500``, one
duration and warm-up for all); :meth:`Sweep.points` turns that into the ``Point`` list
the runner measures. The fields with help text are ``conveyor bench`` options.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable

from conveyor.bench.loadgen import Point
from conveyor.bench.schedule import DISTRIBUTIONS
from conveyor.options import option


def positive_list(kind: type) -> Callable[[str], list]:
    """An argparse type: "1,4,16" -> [1, 4, 16], every value > 0."""

    def parse(text: str) -> list:
        try:
            values = [kind(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"want a comma-separated list, got {text!r}") from None
        if not values or any(v <= 0 for v in values):
            raise argparse.ArgumentTypeError(f"want positive numbers, got {text!r}")
        return values

    return parse


@dataclasses.dataclass(frozen=True)
class Sweep:
    concurrency: tuple[int, ...] = dataclasses.field(
        default=(),
        metadata=option(
            "closed loop: requests in flight, e.g. 1,4,16 (default: 1)",
            flags=("-c", "--concurrency"),
            type=positive_list(int),
            action="store",
            metavar="N[,N...]",
        ),
    )
    request_rate: tuple[float, ...] = dataclasses.field(
        default=(),
        metadata=option(
            "open loop: requests per second, e.g. 100,500,1000",
            flags=("-r", "--request-rate"),
            type=positive_list(float),
            action="store",
            metavar="R[,R...]",
        ),
    )
    distribution: str = dataclasses.field(
        default="constant", metadata=option("open-loop schedule", choices=DISTRIBUTIONS)
    )
    duration_s: float = dataclasses.field(
        default=5.0,
        metadata=option(
            "measured seconds per point", flags=("-d", "--duration"), metavar="SECONDS"
        ),
    )
    warmup_s: float = dataclasses.field(
        default=1.0,
        metadata=option(
            "unmeasured seconds before each point", flags=("--warmup",), metavar="SECONDS"
        ),
    )
    max_inflight: int = dataclasses.field(
        default=1024, metadata=option("open loop: requests in flight per generator process at most")
    )
    spin_s: float = dataclasses.field(
        default=0.0,
        metadata=option(
            "open loop: busy-wait this many seconds before each send (e.g. 0.0015) for a send "
            "lag of microseconds instead of about a millisecond, at the cost of a core",
            flags=("--spin",),
            metavar="SECONDS",
        ),
    )
    drain_s: float = 10.0  # how long requests still running after a point may finish

    def __post_init__(self) -> None:
        if self.concurrency and self.request_rate:
            raise ValueError(
                "give --concurrency (closed loop) or --request-rate (open loop), not both"
            )

    def points(self, seed: int = 0) -> list[Point]:
        common = Point(
            concurrency=1,
            warmup_s=self.warmup_s,
            duration_s=self.duration_s,
            seed=seed,
            max_inflight=self.max_inflight,
            drain_s=self.drain_s,
        )
        if self.request_rate:
            return [
                dataclasses.replace(
                    common,
                    concurrency=None,
                    rate=r,
                    distribution=self.distribution,
                    spin_s=self.spin_s,
                )
                for r in self.request_rate
            ]
        return [dataclasses.replace(common, concurrency=c) for c in (self.concurrency or (1,))]
