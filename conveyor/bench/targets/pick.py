"""A URL picks the target implementation: ``inprocess``, ``http://`` or ``grpc://``.

Implementations are imported only when picked, so an HTTP run never loads grpc and the
in-process one never opens a socket.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from conveyor.bench.targets.base import Client, Control, TargetSpec


def make_control(spec: TargetSpec) -> Control:
    if spec.scheme == "inprocess":
        from conveyor.bench.targets.inprocess import InProcessControl

        return InProcessControl(spec)
    if spec.scheme == "http":
        from conveyor.bench.targets.http import HttpControl

        return HttpControl(spec)
    from conveyor.bench.targets.grpc import GrpcControl

    return GrpcControl(spec)


def make_client(
    spec: TargetSpec, inputs: Mapping[str, np.ndarray], control: Control | None = None
) -> Client:
    """A client for one generator; ``control`` is needed for ``inprocess`` (it owns the engine).

    The request is built once, here, from ``inputs`` (arrays of the model's datatypes, as
    ``inputs.make_inputs`` makes them) and sent unchanged on every ``infer()``.
    """
    scheme = spec.scheme
    if scheme == "inprocess":
        from conveyor.bench.targets.inprocess import InProcessClient, InProcessControl

        if not isinstance(control, InProcessControl):
            raise ValueError("the inprocess target runs in the process that loaded the engine")
        return InProcessClient(control.engine, spec, inputs)
    if scheme == "http":
        from conveyor.bench.targets.http import HttpClient

        return HttpClient(spec, inputs)
    if spec.streaming:
        from conveyor.bench.targets.grpc_stream import GrpcStreamClient

        return GrpcStreamClient(spec, inputs)
    from conveyor.bench.targets.grpc import GrpcClient

    return GrpcClient(spec, inputs)
