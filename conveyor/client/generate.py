"""The client's side of the generate extension: arrays to its flat JSON, events back.

Inputs travel as flat lists (or one value), BYTES as text; the server puts them back in the
model's input shape. Outputs come back as values or flat lists and are made arrays of the
datatypes the model's config names.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import numpy as np

from conveyor.errors import InvalidInput
from conveyor.futures import Outputs
from conveyor.protocol.datatypes import BYTES, numpy_dtype
from conveyor.protocol.json_codec import loads


def generate_body(inputs: Mapping[str, np.ndarray], parameters: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for name, array in inputs.items():
        values = [
            v.decode("utf-8") if isinstance(v, bytes) else v
            for v in np.asarray(array).reshape(-1).tolist()
        ]
        body[name] = values[0] if len(values) == 1 else values
    if parameters:
        body["parameters"] = parameters
    return body


def generate_outputs(
    event: Mapping[str, Any], config: Mapping[str, Any], wanted: Sequence[str] | None
) -> Outputs:
    """One response's outputs, typed as the model's config says (Triton's JSON form)."""
    types = {
        entry["name"]: str(entry["data_type"]).removeprefix("TYPE_")
        for entry in config.get("output", [])
    }
    outputs: Outputs = {}
    for name, value in event.items():
        if name in ("model_name", "model_version") or (wanted and name not in wanted):
            continue
        values = value if isinstance(value, list) else [value]
        datatype = types.get(name)
        if datatype in (BYTES, "STRING"):
            outputs[name] = np.array(
                [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in values],
                dtype=object,
            )
        elif datatype is not None:
            outputs[name] = np.array(values, dtype=numpy_dtype(datatype))
        else:
            raise InvalidInput(f"the server sent output {name!r}, which the model does not have")
    return outputs


async def sse_events(lines: Any) -> AsyncIterator[dict[str, Any]]:
    """Each ``data:`` event of a Server-Sent Events body (an aiohttp StreamReader)."""
    data: list[bytes] = []
    async for raw in lines:
        line = raw.rstrip(b"\r\n")
        if line.startswith(b"data:"):
            data.append(line[5:].lstrip())
        elif not line and data:
            event = loads(b"\n".join(data), "server-sent event")
            data = []
            if isinstance(event, dict):
                yield event
