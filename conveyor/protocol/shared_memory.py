"""Tensors that live in a registered system shared-memory region: the request's side.

Triton's shared-memory extension puts three parameters on an input or a requested output,
over HTTP and gRPC alike: ``shared_memory_region`` (a registered region's name),
``shared_memory_byte_size`` and ``shared_memory_offset`` (default 0, bytes into the region).
An input with them carries no data on the wire; an output with them is written into the
region and answered with the same parameters and no data.

This module only reads and writes those parameters; the regions themselves (the mappings,
bounds checks at use, reference counts) are the server's
(``conveyor.server.shared_memory``). Pure data, no I/O.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Mapping
from typing import Any

from conveyor.errors import InvalidInput


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or 'localhost') reaches this machine only: where a client
    and a server share /dev/shm, so system shared memory can work between them."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


REGION = "shared_memory_region"
BYTE_SIZE = "shared_memory_byte_size"
OFFSET = "shared_memory_offset"
PARAMETERS = (REGION, BYTE_SIZE, OFFSET)

# How a refusal of an output larger than its region slot reads on the wire. Clients that
# size output slots themselves (conveyor.Client) recognise it to retry on the wire: only the
# message text crosses HTTP and gRPC, so both sides use these two functions.
_OUTPUT_TOO_LARGE = f"{BYTE_SIZE} is "


def output_too_large(
    where: str, byte_size: int, datatype: str, shape: list[int], needed: int
) -> str:
    """The message for an output needing ``needed`` bytes where ``byte_size`` were given."""
    return (
        f"{where}: {_OUTPUT_TOO_LARGE}{byte_size} bytes but the output "
        f"({datatype}, shape {shape}) needs {needed}"
    )


def is_output_too_large(message: str) -> bool:
    """Whether an error message is :func:`output_too_large`'s."""
    return _OUTPUT_TOO_LARGE in message and "but the output" in message


@dataclasses.dataclass(frozen=True, slots=True)
class Location:
    """Where a tensor's bytes are: ``byte_size`` bytes at ``offset`` in region ``region``."""

    region: str
    byte_size: int
    offset: int = 0

    def parameters(self) -> dict[str, Any]:
        """The tensor parameters that say so, as Triton writes them (no offset when 0)."""
        parameters: dict[str, Any] = {REGION: self.region, BYTE_SIZE: self.byte_size}
        if self.offset:
            parameters[OFFSET] = self.offset
        return parameters


@dataclasses.dataclass(frozen=True, slots=True)
class InputInRegion:
    """An input whose bytes are in a region: what the data plane needs to view them."""

    location: Location
    datatype: str
    shape: tuple[int, ...]


@dataclasses.dataclass(slots=True)
class SharedMemoryUse:
    """The tensors of one request that live in shared memory, by name."""

    inputs: dict[str, InputInRegion] = dataclasses.field(default_factory=dict)
    outputs: dict[str, Location] = dataclasses.field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.inputs or self.outputs)


def location(parameters: Mapping[str, Any] | None, where: str) -> Location | None:
    """The tensor's shared-memory location, or None when its parameters name no region.

    ``where`` names the tensor in errors, e.g. "input 'INPUT0'".
    """
    if not parameters or not any(key in parameters for key in PARAMETERS):
        return None
    region = parameters.get(REGION)
    if not isinstance(region, str) or not region:
        raise InvalidInput(
            f"{where}: in shared memory, {REGION!r} must name a registered region (a "
            f"non-empty string), got {region!r}"
        )
    if BYTE_SIZE not in parameters:
        raise InvalidInput(f"{where}: in shared memory, {REGION!r} needs {BYTE_SIZE!r} too")
    return Location(
        region,
        _size(parameters.get(BYTE_SIZE), BYTE_SIZE, where),
        _size(parameters.get(OFFSET, 0), OFFSET, where),
    )


def _size(value: Any, key: str, where: str) -> int:
    if type(value) is not int or value < 0:
        raise InvalidInput(f"{where}: {key!r} must be an integer >= 0, got {value!r}")
    return value
