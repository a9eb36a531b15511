"""A worker process's loop: read an execution's inputs from shared memory, run, write outputs.

The worker is forked from its model's zygote, so the loaded model (and its weights) is the
zygote's, shared copy-on-write. It serves one engine-side slot over one channel until the
engine hangs up, and never returns into the zygote's code (the caller ends with os._exit).
"""

from __future__ import annotations

import mmap
import os

import numpy as np

from conveyor.backends.base import LoadedModel
from conveyor.engine.outputs import requested_outputs
from conveyor.engine.processes.channel import Channel
from conveyor.engine.processes.messages import Execute, Executed, Failed, flatten_error
from conveyor.engine.processes.shm import SharedBuffer, attach, read_tensors, unmap, write_tensors
from conveyor.errors import ModelError


def serve(model: LoadedModel, name: str, channel: Channel) -> None:
    """Answer Execute messages until the engine closes the channel (or dies)."""
    inputs: mmap.mmap | None = None
    outputs = SharedBuffer(f"{name}-out-{os.getpid()}")
    shared = 0  # the generation of ``outputs`` the engine has mapped
    while True:
        try:
            message, fds = channel.recv()
        except (EOFError, OSError):
            return
        if not isinstance(message, Execute):
            for fd in fds:
                os.close(fd)
            continue
        if fds:  # the engine grew its input buffer (or this worker is new): map the new one
            if inputs is not None:
                unmap(inputs)
            inputs = attach(fds[0], message.buffer_size)
            for fd in fds[1:]:
                os.close(fd)
        reply: Executed | Failed
        send_fds: list[int] = []
        try:
            arrays = read_tensors(inputs, message.inputs, copy=False)
            produced = model.run(arrays, message.outputs)
            refs = write_tensors(outputs, _shippable(produced, message.outputs, name))
            del arrays, produced
            reply = Executed(message.id, refs, outputs.size)
            if shared != outputs.generation:
                send_fds = [outputs.fd]
                shared = outputs.generation
        except Exception as exc:
            reply = Failed(message.id, flatten_error(exc, name))
        try:
            channel.send(reply, send_fds)
        except OSError:
            return


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
