"""Where the bench sends requests: ``inprocess`` (the engine, no server), ``http://``, ``grpc://``.

Each target has a control side (``describe``, ``statistics``; blocking, used by the runner
between measurements) and an async ``Client`` that sends one prepared request per
``infer()`` call (used by the load generator in each worker process).
"""

from conveyor.bench.targets.base import Client, Control, TargetSpec, make_client, make_control

__all__ = ["Client", "Control", "TargetSpec", "make_client", "make_control"]
