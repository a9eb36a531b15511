"""What every remote client shares: a background event loop, futures, unit conversion.

A client has the in-process engine's shape: ``submit()`` returns an
:class:`~conveyor.futures.InferFuture` at once, ``await client.infer(...)`` suspends only
the caller's coroutine, and ``as_completed()`` yields futures in completion order. The
requests run on one event loop in a daemon thread that the client owns, so the same
client works from plain threads and from any asyncio loop.

A transport (HTTP, gRPC) implements only the coroutines at the bottom: ``_open``,
``_close``, ``_infer``, ``_get`` and the two that (un)register a shared-memory region. Large
tensors to and from a server on this machine go through shared memory
(``shared_memory.py``).
Priority and timeout arrive in the engine's units (higher runs first; seconds) and are
converted to the wire's once, in ``submit``.
"""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncIterator, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from conveyor.client.shared_memory import (
    DEFAULT_THRESHOLD,
    OutputSlot,
    RegionPool,
    bytes_needed,
    on_this_machine,
    shape_key,
)
from conveyor.errors import Cancelled, ConveyorError, InvalidInput, Unsupported
from conveyor.futures import InferFuture, Outputs
from conveyor.protocol.request import InferenceRequest, wire_parameters
from conveyor.protocol.shared_memory import InputInRegion, is_output_too_large
from conveyor.streams import DEFAULT_BUFFER, ResponseStream

T = TypeVar("T")

# Seconds the network part of a call may take unless the client is told otherwise.
DEFAULT_CALL_TIMEOUT_S = 300.0


async def _pump(responses: AsyncIterator[Outputs], stream: ResponseStream) -> None:
    """On the client's loop: each response into ``stream``; its bounded buffer is filled
    from a worker thread, so a slow reader slows the reading of the call, not the loop."""
    loop = asyncio.get_running_loop()
    error: BaseException | None = None
    try:
        async for outputs in responses:
            await loop.run_in_executor(None, stream.put, outputs)
    except asyncio.CancelledError:
        error = Cancelled("the stream was closed")
        raise
    except Exception as exc:
        error = exc
    finally:
        stream.finish(error)
        await responses.aclose()  # type: ignore[attr-defined]  # an async generator


def _check_wire(request: InferenceRequest) -> None:
    """Refuse, in the caller's thread, what V2 cannot express (a positive priority, a
    timeout that is not positive)."""
    wire_parameters(request)


class BaseClient(abc.ABC):
    """A V2 client over one transport. Use :func:`conveyor.client.Client` to make one."""

    def __init__(
        self,
        url: str,
        *,
        call_timeout: float | None = DEFAULT_CALL_TIMEOUT_S,
        shared_memory: bool = True,
        shared_memory_threshold: int = DEFAULT_THRESHOLD,
    ) -> None:
        """``call_timeout``: seconds the network part of any call may take (None: no limit).

        ``shared_memory``: send inputs of at least ``shared_memory_threshold`` bytes through
        system shared memory when the server is on this machine and offers it (False: never).
        """
        self.url = url.rstrip("/")
        self.call_timeout = call_timeout
        self._want_shared_memory = shared_memory and on_this_machine(self.url)
        self._shared_memory_threshold = shared_memory_threshold
        # Set once open, when the server offers shared memory; None: everything on the wire.
        self.shared_memory: RegionPool | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"conveyor-client {self.url}", daemon=True
        )
        self._thread.start()
        self._closed = False
        self._opened: concurrent.futures.Future[None] | None = None
        self._lock = threading.Lock()
        self._tasks: set[asyncio.Task[Outputs]] = set()  # requests in flight (loop thread only)

    # -- inference --------------------------------------------------------------------------

    def submit(
        self,
        model: str,
        inputs: Mapping[str, np.ndarray],
        *,
        version: int | str | None = None,
        outputs: Sequence[str] | None = None,
        priority: int = 0,
        timeout: float | None = None,
        request_id: str | None = None,
    ) -> InferFuture:
        """Send one request; its future completes when the answer arrives.

        ``priority``: higher runs first, 0 is the default (over V2 only 0 and negative values
        can be expressed). ``timeout``: seconds the server may keep the request before
        giving up on it (DeadlineExceeded). ``future.cancel()`` abandons the request.
        """
        request = InferenceRequest(model, inputs, version, outputs, request_id, priority, timeout)
        _check_wire(request)
        self._ensure_open()
        future = InferFuture()
        future.request_id = request_id
        call = self._send(request)
        self._loop.call_soon_threadsafe(self._start, future, call)
        return future

    def stream_responses(
        self,
        model: str,
        inputs: Mapping[str, np.ndarray],
        *,
        version: int | str | None = None,
        outputs: Sequence[str] | None = None,
        priority: int = 0,
        timeout: float | None = None,
        request_id: str | None = None,
        buffer: int = DEFAULT_BUFFER,
    ) -> ResponseStream:
        """Send one request; return at once the stream of its responses, as ``Engine.stream``.

        A decoupled model's responses arrive as the server produces them (``for`` or
        ``async for``); any other model's answer is the only one. Closing the stream ends
        the call, and the server stops the model. gRPC sends the request on
        ModelStreamInfer; HTTP on the generate extension's ``generate_stream`` (its JSON
        carries inputs as flat lists: multi-dimensional inputs lose their shape there).
        """
        request = InferenceRequest(model, inputs, version, outputs, request_id, priority, timeout)
        _check_wire(request)
        self._ensure_open()
        stream = ResponseStream(buffer)
        stream.request_id, stream.model_name = request_id, model
        responses = self._responses(request)
        pumping = asyncio.run_coroutine_threadsafe(_pump(responses, stream), self._loop)
        stream.on_close(pumping.cancel)  # ends the call: the server stops the model
        return stream

    async def _responses(self, request: InferenceRequest) -> AsyncIterator[Outputs]:
        """Each response of one request, as the server sends it."""
        raise Unsupported(f"{type(self).__name__} cannot stream responses")
        yield {}  # an async generator, for the type checker

    async def infer(self, model: str, inputs: Mapping[str, np.ndarray], **kwargs: Any) -> Outputs:
        """``submit`` and await the result from any event loop; no thread waits meanwhile."""
        return await self.submit(model, inputs, **kwargs)

    async def _send(self, request: InferenceRequest) -> Outputs:
        """``_infer``, with large tensors in one of the client's shared-memory regions:
        large inputs always, large outputs once their size is known (see
        :mod:`conveyor.client.shared_memory`)."""

        def on_the_wire() -> Coroutine[Any, Any, Outputs]:
            return self._infer(request)

        pool = self.shared_memory
        if pool is None:
            return await on_the_wire()
        inputs, outputs = request.inputs, request.outputs
        large = pool.large_inputs(inputs)
        key = shape_key(request.model, request.version, outputs, inputs)
        known = pool.known_outputs(key)
        if not large and known is None:
            results = await on_the_wire()
            pool.learn(key, results)
            return results
        input_bytes = bytes_needed([array.nbytes for array in large.values()])
        output_sizes = known.large if known is not None else {}
        needed = bytes_needed([input_bytes, *output_sizes.values()])
        region = pool.take(needed)
        if region is None:
            region = pool.make(needed)
            try:
                await self._register_region(region.name, region.key, region.byte_size)
            except ConveyorError:
                # The server says no (another user's /dev/shm, a changed setting): from now
                # on this client sends everything on the wire.
                pool.forget(region)
                self.shared_memory = None
                return await on_the_wire()
        try:
            placed = region.place(large)
            slots = region.reserve(output_sizes, input_bytes)
            rest = {name: array for name, array in inputs.items() if name not in placed}
            asked = outputs if outputs is not None or known is None else list(known.names)
            try:
                results = await self._infer(
                    request._replace(inputs=rest, outputs=asked),
                    in_regions=placed,
                    out_regions=slots,
                )
            except Unsupported:
                self.shared_memory = None  # turned off on the server since
                return await on_the_wire()
            except InvalidInput as exc:
                if not slots or not is_output_too_large(str(exc)):
                    raise
                # An output outgrew its slot: the model ran, but its answer did not fit.
                pool.forget_outputs(key)
                return await on_the_wire()
            pool.learn(key, results)
            return results
        finally:
            pool.give_back(region)  # answered: the server has read it, we have copied out

    def _start(self, future: InferFuture, call: Coroutine[Any, Any, Outputs]) -> None:
        # On the client's loop.
        if future.cancelled():
            call.close()
            return
        task = self._loop.create_task(call)
        self._tasks.add(task)

        def settle(done: asyncio.Task[Outputs]) -> None:
            self._tasks.discard(done)
            if future.done():
                return
            try:
                if done.cancelled():
                    future.cancel()
                elif done.exception() is not None:
                    future.set_exception(done.exception())
                else:
                    future.set_result(done.result())
            except concurrent.futures.InvalidStateError:
                pass  # cancelled by the caller meanwhile

        def on_caller_cancel(f: concurrent.futures.Future[Outputs]) -> None:
            if f.cancelled() and not task.done():
                self._loop.call_soon_threadsafe(task.cancel)

        task.add_done_callback(settle)
        future.add_done_callback(on_caller_cancel)

    # -- server and model information -------------------------------------------------------

    def server_live(self) -> bool:
        return bool(self._call(self._get("live")))

    def server_ready(self) -> bool:
        return bool(self._call(self._get("ready")))

    def model_ready(self, model: str, version: int | str | None = None) -> bool:
        return bool(self._call(self._get("model_ready", model, version)))

    def server_metadata(self) -> dict[str, Any]:
        return dict(self._call(self._get("server_metadata")))

    def model_metadata(self, model: str, version: int | str | None = None) -> dict[str, Any]:
        return dict(self._call(self._get("model_metadata", model, version)))

    def model_config(self, model: str, version: int | str | None = None) -> dict[str, Any]:
        """The model's configuration in Triton's model-config JSON form."""
        return dict(self._call(self._get("model_config", model, version)))

    def statistics(
        self, model: str | None = None, version: int | str | None = None
    ) -> dict[str, Any]:
        """Triton statistics-extension JSON: ``{"model_stats": [...]}``."""
        return dict(self._call(self._get("statistics", model, version)))

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        self._ensure_open()
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result()

    # -- lifecycle --------------------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self._closed:
            raise RuntimeError("this client is closed")
        with self._lock:
            if self._opened is None:
                self._opened = asyncio.run_coroutine_threadsafe(self._open_all(), self._loop)
        self._opened.result()

    async def _open_all(self) -> None:
        await self._open()
        if not self._want_shared_memory:
            return
        try:
            metadata = await self._get("server_metadata")
        except ConveyorError:
            return  # not answering yet: use the wire
        if "system_shared_memory" in metadata.get("extensions", ()):
            self.shared_memory = RegionPool(self._shared_memory_threshold)

    async def _release_regions(self) -> None:
        pool = self.shared_memory
        if pool is None:
            return
        self.shared_memory = None
        for region in list(pool.regions):
            with contextlib.suppress(ConveyorError):  # a server gone has unmapped it anyway
                await self._unregister_region(region.name)
            region.destroy()

    def close(self) -> None:
        """Close the connections; futures of requests still in flight are cancelled; the
        client's shared-memory regions are unregistered and unlinked."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._opened is not None:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()

    async def _shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
        await self._release_regions()
        await self._close()

    def __enter__(self) -> BaseClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> BaseClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    # -- what a transport implements (all run on the client's loop) -------------------------

    @abc.abstractmethod
    async def _open(self) -> None:
        """Create connections/sessions; called once, on the client's loop."""

    @abc.abstractmethod
    async def _close(self) -> None:
        """Release what ``_open`` created."""

    @abc.abstractmethod
    async def _infer(
        self,
        request: InferenceRequest,
        *,
        in_regions: Mapping[str, InputInRegion] | None = None,
        out_regions: Mapping[str, OutputSlot] | None = None,
    ) -> Outputs:
        """One inference (its priority and timeout are sent in wire units).

        ``in_regions``: more inputs, already in registered shared-memory regions.
        ``out_regions``: outputs (named in ``request.outputs``) for the server to write into
        a region; each is read back from its slot into the result. Raise
        :mod:`conveyor.errors` classes for failures the server reports.
        """

    @abc.abstractmethod
    async def _register_region(self, name: str, key: str, byte_size: int) -> None:
        """Register system shared-memory object ``key`` as region ``name``."""

    @abc.abstractmethod
    async def _unregister_region(self, name: str) -> None:
        """Unregister region ``name``."""

    @abc.abstractmethod
    async def _get(
        self, what: str, model: str | None = None, version: int | str | None = None
    ) -> Any:
        """``what`` is one of: live, ready, model_ready (bools); server_metadata,
        model_metadata, model_config, statistics (JSON-like dicts)."""
