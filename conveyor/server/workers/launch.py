"""What a front-end process is told when it starts (pickled to its standard input)."""

from __future__ import annotations

import dataclasses

from conveyor.server.settings import Settings


@dataclasses.dataclass(frozen=True, slots=True)
class Launch:
    settings: Settings
    index: int
    http_fd: int  # the listening HTTP socket, shared by every front-end process
    control_fd: int  # blocking connection: control calls
    calls_fd: int  # multiplexed connection: inference, load/unload
    grpc_port: int  # bound by each process with SO_REUSEPORT
    log_level: int
