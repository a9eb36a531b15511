"""The messages between a front-end process and the engine process (pickled into the
frames of conveyor/ipc/frames.py).

A front end sends :class:`Call` (a data-plane method by name) and :class:`Cancel`; the
engine answers each call with one :class:`Reply` carrying the same id, and a streamed call
(``stream``, ``generate``) also with its responses, :class:`StreamItem` each, then one
:class:`StreamEnd`. :class:`Observe`
(an answered request's latency, for the one set of histograms) needs no answer.
"""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

from conveyor.errors import ConveyorError


@dataclasses.dataclass(frozen=True, slots=True)
class Call:
    call_id: int
    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class Reply:
    call_id: int
    value: Any = None
    error: BaseException | None = None
    # For an infer call: the request id, model and version the engine resolved.
    served: tuple[str | None, str | None, str | None] | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Cancel:
    """The front end's client went away: drop the request if it is still queued."""

    call_id: int


@dataclasses.dataclass(frozen=True, slots=True)
class StreamItem:
    """One response of a streamed call (``stream`` or ``generate``)."""

    call_id: int
    item: Any


@dataclasses.dataclass(frozen=True, slots=True)
class StreamEnd:
    """A streamed call's last message: no response follows (``error``: why it failed)."""

    call_id: int
    error: BaseException | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Observe:
    """Answered requests' latencies: (model, version, seconds, protocol) each, sent in
    batches so they cost the engine process no wakeup of its own per request."""

    samples: tuple[tuple[str, str, float, str], ...]


def portable(error: BaseException) -> BaseException:
    """``error`` if it survives pickling (Conveyor's errors do, keeping their status);
    otherwise a ConveyorError (an internal error) that says what it was."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return ConveyorError(f"{type(error).__name__}: {error}")
    return error
