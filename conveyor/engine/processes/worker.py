"""A worker process's loop: read an execution's inputs from shared memory, run, write outputs.

The worker is forked from its model's zygote, so the loaded model (and its weights) is the
zygote's, shared copy-on-write. It serves one engine-side slot over one channel until the
engine hangs up, and never returns into the zygote's code (the caller ends with os._exit).
"""

from __future__ import annotations

import itertools
import mmap
import os
import traceback
from collections.abc import Sequence

import numpy as np

from conveyor.backends.base import LoadedModel, RequestData
from conveyor.backends.custom_metrics import CUSTOM_METRICS
from conveyor.engine.outputs import requested_outputs
from conveyor.engine.processes import messages
from conveyor.engine.processes.shm import SharedBuffer, attach, read_tensors, unmap, write_tensors
from conveyor.errors import ConveyorError, ModelError
from conveyor.futures import InferFuture
from conveyor.ipc.channel import Channel
from conveyor.protocol.request import InferenceRequest


class EngineCaller:
    """A worker's ModelCaller: the call goes to the engine over the worker's channel.

    The worker is single-threaded and its slot waits on the channel for the execution's
    reply, so the slot answers the call in between; the future is done when it returns.
    """

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._ids = itertools.count(1)

    def __call__(self, request: InferenceRequest) -> InferFuture:
        call = messages.Call(next(self._ids), request)
        send(self._channel, call)
        reply, _ = self._channel.recv()
        future = InferFuture()
        future.request_id = request.id
        if isinstance(reply, messages.Returned) and reply.id == call.id:
            future.set_result(reply.outputs)
        elif isinstance(reply, messages.Failed) and reply.id == call.id:
            future.set_exception(reply.error)
        else:
            future.set_exception(
                ModelError(f"call to model {request.model!r}: answered out of step")
            )
        return future


def serve(own: LoadedModel, name: str, channel: Channel, index: int) -> None:
    """Answer Execute messages until the engine closes the channel (or dies)."""
    CUSTOM_METRICS.outbox = []  # this process's metric changes go to the engine's store
    try:
        model = own.forked(index, EngineCaller(channel))
    except Exception as exc:
        error = messages.flatten_error(exc, name)
        error.model_traceback = error.model_traceback or traceback.format_exc()
        send(channel, messages.Failed(0, error))
        return
    send(channel, messages.Ready(os.getpid()))
    try:
        _serve(model, name, channel)
    finally:
        if model is not own:  # its own object: finalize it (a Triton model's finalize())
            model.close()


def _serve(model: LoadedModel, name: str, channel: Channel) -> None:
    inputs: mmap.mmap | None = None
    outputs = SharedBuffer(f"{name}-out-{os.getpid()}")
    shared = 0  # the generation of ``outputs`` the engine has mapped
    while True:
        try:
            message, fds = channel.recv()
        except (EOFError, OSError):
            return
        if not isinstance(message, messages.Execute | messages.ExecuteRequests):
            for fd in fds:
                os.close(fd)
            continue
        if fds:  # the engine grew its input buffer (or this worker is new): map the new one
            if inputs is not None:
                unmap(inputs)
            inputs = attach(fds[0], message.buffer_size)
            for fd in fds[1:]:
                os.close(fd)
        reply: messages.Executed | messages.ExecutedRequests | messages.Failed
        send_fds: list[int] = []
        try:
            arrays = read_tensors(inputs, message.inputs, copy=False)
            if isinstance(message, messages.ExecuteRequests):
                refs, errors = _run_requests(model, name, message, arrays, outputs)
                reply = messages.ExecutedRequests(message.id, refs, errors, outputs.size)
            else:
                produced = model.run(arrays, message.outputs)
                refs = write_tensors(outputs, _shippable(produced, message.outputs, name))
                del produced
                reply = messages.Executed(message.id, refs, outputs.size)
            del arrays
            if shared != outputs.generation:
                send_fds = [outputs.fd]
                shared = outputs.generation
        except Exception as exc:
            reply = messages.Failed(message.id, messages.flatten_error(exc, name))
        try:
            send(channel, reply, send_fds)
        except OSError:
            return


def send(channel: Channel, message: object, fds: Sequence[int] = ()) -> None:
    """Send ``message``, after the custom-metric changes made since the last send."""
    updates = CUSTOM_METRICS.take_outbox()
    if updates:
        channel.send(messages.MetricUpdates(tuple(updates)))
    channel.send(message, fds)


def _run_requests(
    model: LoadedModel,
    name: str,
    message: messages.ExecuteRequests,
    arrays: dict[str, np.ndarray],
    outputs: SharedBuffer,
) -> tuple[tuple[messages.TensorRef, ...], tuple[ConveyorError | None, ...]]:
    """Run a batch request by request; each request's outputs go as "<i>/<name>"."""
    requests = [
        RequestData(
            {key.partition("/")[2]: a for key, a in arrays.items() if key.startswith(f"{i}/")},
            shape.outputs,
            shape.request_id,
            shape.sequence,
            shape.parameters,
        )
        for i, shape in enumerate(message.requests)
    ]
    shipped: dict[str, np.ndarray] = {}
    errors: list[ConveyorError | None] = []
    for i, (request, outcome) in enumerate(
        zip(requests, model.run_requests(requests), strict=True)
    ):
        try:
            if isinstance(outcome, Exception):
                raise outcome
            for output, array in _shippable(outcome, request.outputs, name).items():
                shipped[f"{i}/{output}"] = array
            errors.append(None)
        except Exception as exc:
            errors.append(messages.flatten_error(exc, name))
    return write_tensors(outputs, shipped), tuple(errors)


def _shippable(produced: object, wanted: tuple[str, ...], name: str) -> dict[str, np.ndarray]:
    """The requested outputs, refused in the same words the engine uses for thread instances.

    The engine checks dtypes and shapes itself once the outputs are back; what cannot travel
    (a missing output, a value that is not an array, an object array of anything but bytes
    or str) has to be refused here.
    """
    shipped = requested_outputs(name, produced, wanted)
    for output, array in shipped.items():
        if array.dtype.hasobject and not all(isinstance(v, bytes | str) for v in array.flat):
            kinds = sorted({type(v).__name__ for v in array.flat} - {"bytes", "str"})
            raise ModelError(
                f"model {name!r} returned an object array with {', '.join(kinds)} elements "
                f"for output {output!r}; object arrays may only hold bytes or str"
            )
    return shipped
