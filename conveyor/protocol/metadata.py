"""Server metadata and repository-index entries as plain dicts.

Every function returns JSON-ready dicts in the shape the V2 protocol (and Triton's
extensions) define, so the HTTP front end serializes them as they are and the gRPC front
end copies them field by field into its messages. Nothing here knows a transport.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

SERVER_NAME = "conveyor"

# The V2 / Triton extensions the HTTP front end really implements (GET /v2 lists them).
# Another front end or feature adds its own name when it lands (e.g. system_shared_memory).
EXTENSIONS: tuple[str, ...] = (
    "binary_tensor_data",
    "classification",
    "model_configuration",
    "model_repository",
    "parameters",
    "schedule_policy",
    "statistics",
)


def server_metadata(version: str, extensions: Iterable[str] = EXTENSIONS) -> dict[str, Any]:
    return {"name": SERVER_NAME, "version": version, "extensions": list(extensions)}


def repository_entry(name: str, version: str, state: str, reason: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "state": state, "reason": reason}
    if version:
        entry["version"] = version
    return entry
