"""Connecting a command to the Ray cluster, token authentication included.

``ray start --head`` turns Ray's token authentication on when a token exists on the
machine (``~/.ray/auth_token``, ``RAY_AUTH_TOKEN_PATH`` or ``RAY_AUTH_TOKEN``; ``ray.init()``
and ``ray get-auth-token --generate`` write one). A driver then has to send that token, and
Ray itself sends it only when ``RAY_AUTH_MODE=token`` is set or when ``address="auto"`` found
the cluster on this machine. With an explicit address (``--address``, ``RAY_ADDRESS``) and
no ``RAY_AUTH_MODE``, ``ray.init`` retries for about 20 s and then fails with
``InvalidAuthToken``. So the cluster is asked first, once and quickly: when it refuses
because of the token, a token on this machine is used the way ``ray start`` uses it, and
without one the command stops at once saying what to set.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from conveyor.errors import ClusterRefused

AUTH_MODE = "RAY_AUTH_MODE"
TOKEN = "RAY_AUTH_TOKEN"
TOKEN_PATH = "RAY_AUTH_TOKEN_PATH"
PROBE_TIMEOUT_MS = 10_000  # one GCS answer; a refused token comes back in milliseconds


def connect(address: str) -> None:
    """``ray.init`` onto ``address``, sending the cluster's token when it asks for one."""
    import ray

    check_token(address)
    ray.init(address=address, include_dashboard=False, log_to_driver=False)


def token_source() -> str | None:
    """Where Ray would read a token on this machine (its own order), or None."""
    if os.environ.get(TOKEN):
        return f"the {TOKEN} variable"
    named = os.environ.get(TOKEN_PATH)
    if named and Path(named).expanduser().is_file():
        return named
    default = Path.home() / ".ray" / "auth_token"
    return str(default) if default.is_file() else None


def check_token(address: str) -> None:
    """Ask the cluster's GCS once; on a token refusal use this machine's token or raise
    :class:`ClusterRefused` with what to set. Anything else is left to ``ray.init``."""
    gcs = _gcs_address(address)
    if gcs is None:
        return
    refusal = _probe(gcs)
    if refusal is None:
        return
    source = token_source()
    if os.environ.get(AUTH_MODE) is None and source is not None:
        # What `ray start --head` does when it finds a token: token mode for this process.
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )

        # Ray would log that it turned token mode on, as a warning: it is this command's
        # plan, not a problem, so it is not shown.
        ray_auth_log = logging.getLogger("ray._private.authentication.authentication_token_setup")
        level = ray_auth_log.level
        ray_auth_log.setLevel(logging.ERROR)
        try:
            maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
        finally:
            ray_auth_log.setLevel(level)
        refusal = _probe(gcs)
        if refusal is None:
            return
    where = f"the token from {source} was refused" if source else "no token was found"
    raise ClusterRefused(
        f"the Ray cluster at {gcs} uses token authentication and {where}. On the head node "
        f"`ray get-auth-token` prints the cluster's token: set {AUTH_MODE}=token and "
        f"{TOKEN}=<that token> (or write it to ~/.ray/auth_token) and run this again"
    )


def _gcs_address(address: str) -> str | None:
    """The GCS host:port ``ray.init(address)`` would connect to; None for "local", Ray
    Client (``ray://``) and when no cluster is found (``ray.init`` says so itself)."""
    if address == "auto":
        address = os.environ.get("RAY_ADDRESS") or address
    if address == "local" or "://" in address:
        return None
    try:
        from ray._private.services import canonicalize_bootstrap_address

        return canonicalize_bootstrap_address(address)
    except Exception:  # no cluster to find, a bad address: ray.init's own message is better
        return None


def _probe(gcs: str) -> BaseException | None:
    """The AuthenticationError the GCS answers with, or None (answered, or other trouble)."""
    from ray._raylet import InnerGcsClient  # type: ignore[attr-defined]
    from ray.exceptions import AuthenticationError

    try:
        with _quiet_stderr():  # Ray's C++ client logs a refusal this function reports itself
            InnerGcsClient.standalone(gcs, None, PROBE_TIMEOUT_MS)
    except AuthenticationError as refused:
        return refused
    except Exception:
        return None
    return None


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """File descriptor 2 points at /dev/null inside the block (C++ logs write there)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
