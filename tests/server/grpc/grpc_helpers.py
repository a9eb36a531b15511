"""Constants shared by the gRPC tests (a plain module: conftest.py holds only fixtures)."""

from __future__ import annotations

MiB = 1024 * 1024
MAX_MESSAGE_BYTES = 8 * MiB  # the test server's limit: small, so the size-limit test sends little
