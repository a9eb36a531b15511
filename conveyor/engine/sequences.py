"""The sequence batcher: a stateful model's requests, each sequence bound to one instance.

A model with ``sequence_batching`` keeps state between the requests of one sequence (a
running sum, a speech decoder's context), so every request of a sequence must run on the
same instance, one after the other, in the order sent. This queue takes the place of the
model's :class:`RequestQueue` (same ``put``/``take``/``close`` shape) and does that:

- each instance thread is a *lane* with ``slots`` sequence slots (``max_batch_size``, or 1);
  a sequence's first request (``start``) binds it to a free slot, its last (``end``)
  releases the slot once it has run. With every slot taken, new sequences wait in a bounded
  backlog (``max_queued_sequences``), then are refused (UNAVAILABLE);
- a lane's execution takes at most one request per slot (the oldest of that sequence), so
  requests of different sequences share an execution but one sequence never has two
  requests in flight, and the lane's single thread keeps them in order;
- with the ``oldest`` strategy a lane holds ``max_candidate_sequences`` slots, more than one
  execution takes: an execution takes the sequences whose waiting request is oldest, up to
  ``max_batch_size`` of them, and waits up to ``max_queue_delay_us`` (from the oldest) for
  a fuller batch, trimming to a preferred batch size as dynamic batching does;
- a sequence with no request for ``max_sequence_idle_us`` loses its slot; its next request
  is told so (a bounded memory of released ids), not mistaken for one never started;
- implicit state: each request is given its sequence's state inputs as it is taken (zeros
  on a start), and the model version hands back the state outputs it produced
  (``keep_states``) before the lane takes that sequence's next request.

Each instance thread claims its lane the first time it asks for work: instance threads live
as long as the model, so the claim is stable without the instances knowing of sequences.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from conveyor.backends.base import SequenceInfo
from conveyor.engine.request import Request
from conveyor.engine.scheduler import BatchPolicy, Clock, start_request
from conveyor.errors import InvalidInput, QueueFull, ShuttingDown
from conveyor.protocol import triton_words as triton
from conveyor.protocol.datatypes import numpy_dtype
from conveyor.repository.sequences import ControlKind, SequenceBatching

_REMEMBERED_RELEASES = 4096  # idle-released ids remembered, to answer their next request


class _Sequence:
    __slots__ = ("ended", "id", "last_active", "pending", "running", "slot", "states")

    def __init__(self, sequence_id: int | str, now: float) -> None:
        self.id = sequence_id
        self.pending: collections.deque[Request] = collections.deque()
        self.slot: _Slot | None = None
        self.running = 0
        self.ended = False  # its end request is queued: no more requests will join it
        self.last_active = now
        self.states: dict[str, np.ndarray] = {}  # implicit state: input name -> tensor


class _Slot:
    __slots__ = ("lane", "sequence")

    def __init__(self, lane: int) -> None:
        self.lane = lane
        self.sequence: _Sequence | None = None


class SequenceQueue:
    """A stateful model's queue: requests routed to their sequence's slot, in order."""

    def __init__(
        self,
        model: str,
        batching: SequenceBatching,
        *,
        lanes: int,
        slots: int,
        capacity: int,
        batched: bool = False,
        max_batch: int | None = None,
        clock: Clock = time.monotonic,
        on_expired: Callable[[Request], None] = lambda request: None,
    ) -> None:
        self.model = model
        self.capacity = capacity
        self.clock = clock
        self._batching = batching
        self._idle_s = batching.max_sequence_idle_us / 1e6
        self._on_expired = on_expired
        self._cond = threading.Condition()
        self._lanes = [[_Slot(lane) for _ in range(slots)] for lane in range(lanes)]
        self._active: dict[int | str, _Sequence] = {}  # by id: started and not yet ended
        self._backlog: collections.deque[_Sequence] = collections.deque()
        self._released: collections.OrderedDict[int | str, None] = collections.OrderedDict()
        self._running: list[list[_Sequence]] = [[] for _ in range(lanes)]
        self._owners: dict[Request, _Sequence] = {}  # taken requests of stateful models
        self._batched = batched
        # An execution's rows: every slot under direct, max_batch_size under oldest.
        self._max_batch = slots if max_batch is None else max_batch
        oldest = batching.oldest
        self._delay_s = oldest.max_queue_delay_us / 1e6 if oldest else 0.0
        self._preferred = oldest.preferred_batch_sizes if oldest else ()
        self._queued = 0
        self._claimed = 0
        self._local = threading.local()
        self._closed = False

    def __len__(self) -> int:
        return self._queued

    # -- submitting -------------------------------------------------------------------------

    def put(self, request: Request) -> None:
        info = request.sequence
        assert info is not None, "the model version checks every request has a sequence"
        with self._cond:
            if self._closed:
                raise ShuttingDown(
                    f"model {self.model!r} is shutting down; it takes no new requests"
                )
            now = self.clock()
            self._release_idle(now)
            sequence = self._active.get(info.id)
            if info.start and sequence is not None:
                raise InvalidInput(
                    f"model {self.model!r}: sequence {info.id!r} is already running; a request "
                    "with sequence_start for it must wait for its sequence_end (or its "
                    f"max_sequence_idle_microseconds of {self._batching.max_sequence_idle_us})"
                )
            if not info.start and sequence is None:
                raise InvalidInput(self._not_started(info.id))
            if self._queued >= self.capacity:
                raise QueueFull(
                    triton.first(
                        triton.QUEUE_FULL,
                        f"model {self.model!r} has {self.capacity} requests queued "
                        "(max_queue_size); retry later",
                    )
                )
            if sequence is None:
                sequence = self._start_sequence(info.id, now)
            sequence.pending.append(request)
            sequence.last_active = now
            self._queued += 1
            if info.end:
                sequence.ended = True
                del self._active[info.id]
            self._cond.notify_all()

    def _not_started(self, sequence_id: int | str) -> str:
        if sequence_id in self._released:
            return (
                f"model {self.model!r}: sequence {sequence_id!r} was released after it was "
                f"idle for more than max_sequence_idle_microseconds "
                f"({self._batching.max_sequence_idle_us}); start it again with sequence_start"
            )
        # Triton's wording first (its clients match on it), then ours.
        return (
            f"inference request for sequence {sequence_id} to model '{self.model}' must "
            "specify the START flag on the first request of the sequence: model "
            f"{self.model!r} has no running sequence {sequence_id!r}"
        )

    def _start_sequence(self, sequence_id: int | str, now: float) -> _Sequence:
        sequence = _Sequence(sequence_id, now)
        slot = self._free_slot()
        if slot is None:
            limit = self._batching.max_queued_sequences
            if len(self._backlog) >= limit:
                slots = sum(len(lane) for lane in self._lanes)
                raise QueueFull(
                    f"model {self.model!r}: all {slots} sequence slots are held by running "
                    f"sequences and {limit} more wait for one (max_queued_sequences); "
                    "retry later"
                )
            self._backlog.append(sequence)
        else:
            _bind(slot, sequence)
        self._released.pop(sequence_id, None)
        self._active[sequence_id] = sequence
        return sequence

    def _free_slot(self) -> _Slot | None:
        """A free slot on the lane holding the fewest sequences: spread over the instances."""
        best: _Slot | None = None
        best_load = 0
        for lane in self._lanes:
            load = sum(slot.sequence is not None for slot in lane)
            free = next((slot for slot in lane if slot.sequence is None), None)
            if free is not None and (best is None or load < best_load):
                best, best_load = free, load
        return best

    # -- taking (instance threads) ----------------------------------------------------------

    def take(self, policy: BatchPolicy | None = None) -> list[Request] | None:
        """The next execution for this thread's lane: at most one request per sequence,
        marked running; None once closed and this lane has nothing left. ``policy`` is
        unused (the strategy's own batching applies)."""
        lane = self._lane()
        with self._cond:
            self._finished(lane)
            while True:
                now = self.clock()
                self._release_idle(now)
                ready = self._ready(lane)
                delay = self._fuller_batch_wait(ready, now)
                batch = self._gather(lane, ready) if delay is None else []
                started = [request for request in batch if self._start(request, now)]
                if started:
                    return started
                if batch:
                    # All cancelled or expired: their sequences may hold more requests.
                    self._finished(lane)
                    continue
                if self._closed and not ready:
                    return None
                waits = [w for w in (delay, self._idle_wait(now)) if w is not None]
                self._cond.wait(min(waits) if waits else None)

    def _lane(self) -> int:
        lane: int | None = getattr(self._local, "lane", None)
        if lane is None:
            with self._cond:
                lane, self._claimed = self._claimed, self._claimed + 1
            assert lane < len(self._lanes), "more instance threads than lanes"
            self._local.lane = lane
        return lane

    def _ready(self, lane: int) -> list[_Sequence]:
        """The lane's sequences with a request that may run now: in slot order (direct), or
        oldest waiting request first (oldest). Every row of one execution has one shape, so
        only those of the first one's shape, and at most an execution's worth."""
        ready = [
            sequence
            for slot in self._lanes[lane]
            if (sequence := slot.sequence) is not None and sequence.pending and not sequence.running
        ]
        if self._batching.oldest is not None:
            ready.sort(key=lambda sequence: sequence.pending[0].enqueued)
        if not ready:
            return ready
        key = ready[0].pending[0].batch_key
        return [s for s in ready if s.pending[0].batch_key == key][: self._max_batch]

    def _fuller_batch_wait(self, ready: list[_Sequence], now: float) -> float | None:
        """Seconds to wait for more sequences' requests before this batch runs (the oldest
        strategy's max_queue_delay_us), or None: run it now."""
        if not ready or not self._delay_s or self._closed:
            return None
        target = self._max_batch
        if self._preferred:
            target = min(target, self._preferred[-1])
        if len(ready) >= target:
            return None
        left = ready[0].pending[0].enqueued + self._delay_s - now
        return left if left > 0 else None

    def _gather(self, lane: int, ready: list[_Sequence]) -> list[Request]:
        fitting = [size for size in self._preferred if size <= len(ready)]
        if fitting:  # trim to the largest preferred size the batch fills
            ready = ready[: fitting[-1]]
        batch: list[Request] = []
        for sequence in ready:
            head = sequence.pending.popleft()
            if self._batching.states:
                self._give_states(head, sequence)
            sequence.running += 1
            self._queued -= 1
            self._running[lane].append(sequence)
            batch.append(head)
        return batch

    def _give_states(self, request: Request, sequence: _Sequence) -> None:
        lead = (1,) if self._batched else ()
        start = request.sequence is not None and request.sequence.start
        for state in self._batching.states:
            kept = None if start else sequence.states.get(state.input)
            if kept is None:
                kept = np.zeros((*lead, *state.shape), numpy_dtype(state.datatype))
            request.inputs[state.input] = kept
        self._owners[request] = sequence

    def keep_states(self, batch: list[Request], outputs: Sequence[object]) -> None:
        """After an execution: ``outputs[i]`` (a dict of tensors, or an error) is what the
        model produced for ``batch[i]``; its state outputs become the sequence's state."""
        if not self._batching.states:
            return
        with self._cond:
            for request, produced in zip(batch, outputs, strict=True):
                sequence = self._owners.pop(request, None)
                if sequence is None or not isinstance(produced, dict):
                    continue
                for state in self._batching.states:
                    array = produced.get(state.output)
                    if isinstance(array, np.ndarray):
                        sequence.states[state.input] = array

    def _start(self, request: Request, now: float) -> bool:
        return start_request(request, now, self.model, self._on_expired)

    def _finished(self, lane: int) -> None:
        """This lane's last execution is over: its sequences are idle from now, and those
        whose end has run give their slot to a waiting sequence."""
        now = self.clock()
        for request in [r for r, s in self._owners.items() if s in self._running[lane]]:
            del self._owners[request]  # its execution failed: the state stays as it was
        for sequence in self._running[lane]:
            sequence.running -= 1
            sequence.last_active = now
            if sequence.ended and not sequence.pending and not sequence.running:
                self._release(sequence)
        self._running[lane].clear()

    def _release_idle(self, now: float) -> None:
        for lane in self._lanes:
            for slot in lane:
                sequence = slot.sequence
                if (
                    sequence is not None
                    and not sequence.pending
                    and not sequence.running
                    and now - sequence.last_active > self._idle_s
                ):
                    if self._active.get(sequence.id) is sequence:
                        del self._active[sequence.id]
                        self._released[sequence.id] = None
                        if len(self._released) > _REMEMBERED_RELEASES:
                            self._released.popitem(last=False)
                    self._release(sequence)

    def _release(self, sequence: _Sequence) -> None:
        slot = sequence.slot
        assert slot is not None
        slot.sequence, sequence.slot = None, None
        if self._backlog:
            _bind(slot, self._backlog.popleft())
            self._cond.notify_all()

    def _idle_wait(self, now: float) -> float | None:
        """How long a lane may sleep: until the first idle sequence may be released, when
        sequences wait for a slot; otherwise until woken."""
        if not self._backlog:
            return None
        times = [
            slot.sequence.last_active + self._idle_s - now
            for lane in self._lanes
            for slot in lane
            if slot.sequence is not None and not slot.sequence.running and not slot.sequence.pending
        ]
        return max(0.001, min(times)) + 0.001 if times else None

    # -- closing ----------------------------------------------------------------------------

    def close(self) -> None:
        """Take nothing new; sequences waiting for a slot fail (no slot frees while draining
        unless its sequence ends); lanes drain what their slots hold, then get None."""
        with self._cond:
            self._closed = True
            backlog, self._backlog = list(self._backlog), collections.deque()
            for sequence in backlog:
                self._queued -= len(sequence.pending)
                self._active.pop(sequence.id, None)
            self._cond.notify_all()
        for sequence in backlog:
            for request in sequence.pending:
                if request.future.set_running_or_notify_cancel():
                    request.future.set_exception(
                        ShuttingDown(f"model {self.model!r} is shutting down")
                    )

    def take_waiting(self) -> list[Request]:
        """Remove every queued request not yet cancelled, marked running, for the caller to
        fail (no instance is left to run them)."""
        with self._cond:
            sequences = [s for lane in self._lanes for slot in lane if (s := slot.sequence)]
            sequences += self._backlog
            taken = [request for s in sequences for request in s.pending]
            for sequence in sequences:
                sequence.pending.clear()
            self._queued = 0
        return [request for request in taken if request.future.set_running_or_notify_cancel()]


def _bind(slot: _Slot, sequence: _Sequence) -> None:
    slot.sequence, sequence.slot = sequence, slot


def check_sequence_id(model: str, batching: SequenceBatching, sequence: SequenceInfo) -> None:
    """An id of the type the model's CONTROL_SEQUENCE_CORRID takes (either, without one)."""
    wants_strings = batching.string_ids
    if wants_strings is None or isinstance(sequence.id, str) == wants_strings:
        return
    corrid = batching.control(ControlKind.CORRID)
    assert corrid is not None
    expected = "a string" if wants_strings else "an unsigned integer"
    sent = "BYTES" if isinstance(sequence.id, str) else "UINT64"  # as Triton names the id
    raise InvalidInput(
        triton.first(
            triton.corrid_datatype(model, corrid.name, sent, corrid.datatype),
            f"model {model!r}: sequence_id must be {expected} (its CONTROL_SEQUENCE_CORRID "
            f"input {corrid.name!r} is {corrid.datatype}), got {type(sequence.id).__name__} "
            f"{sequence.id!r}",
        )
    )


def control_tensors(
    batching: SequenceBatching, sequence: SequenceInfo, *, batched: bool
) -> dict[str, np.ndarray]:
    """The control inputs Triton fills for a sequence model, for one request of batch size 1:
    START and END as the request says, READY true (it runs), CORRID the sequence id."""
    shape = (1, 1) if batched else (1,)
    tensors: dict[str, np.ndarray] = {}
    flags = {
        ControlKind.START: sequence.start,
        ControlKind.END: sequence.end,
        ControlKind.READY: True,
    }
    for control in batching.controls:
        if control.kind is ControlKind.CORRID:
            if control.datatype == "BYTES":
                value: object = str(sequence.id).encode("utf-8")
                tensors[control.name] = np.full(shape, value, dtype=object)
            else:
                tensors[control.name] = np.full(shape, sequence.id, numpy_dtype(control.datatype))
            continue
        value = control.true_value if flags[control.kind] else control.false_value
        tensors[control.name] = np.full(shape, value, numpy_dtype(control.datatype))
    return tensors
