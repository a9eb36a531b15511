"""The messages between ``conveyor bench`` and its generator processes (``workers``).

Typed, so a message's kind is its class and its fields have names: the parent never
indexes a tuple or compares a string to learn what a generator said. Each point run
carries an id that its answer repeats, so an answer left over from a point that timed out
can never be taken for the next one's. A generator's failure crosses as its formatted
traceback (a str always unpickles, whatever the exception was).
"""

from __future__ import annotations

import dataclasses

from conveyor.bench.loadgen import Point, WorkerResult


# generator -> parent, once: its client is built and it waits for points
@dataclasses.dataclass(frozen=True, slots=True)
class Ready:
    worker: int


# parent -> generator: run this generator's share of ``point``
@dataclasses.dataclass(frozen=True, slots=True)
class RunPoint:
    id: int
    point: Point
    start_ns: int  # time.monotonic_ns() at which the point starts (the same clock everywhere)
    slots: int  # closed loop: this generator's share of the concurrency


# generator -> parent: what it measured of point ``id``
@dataclasses.dataclass(frozen=True, slots=True)
class PointDone:
    id: int
    result: WorkerResult


# generator -> parent: starting (``id`` None) or running point ``id`` failed
@dataclasses.dataclass(frozen=True, slots=True)
class GeneratorFailed:
    id: int | None
    traceback: str


# parent -> generator: close the client and exit
@dataclasses.dataclass(frozen=True, slots=True)
class Stop:
    pass


ToGenerator = RunPoint | Stop
FromGenerator = Ready | PointDone | GeneratorFailed
