"""``wait_until``: the one bounded poll the tests use instead of hand-written sleep loops."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(
    condition: Callable[[], object],
    timeout: float = 10.0,
    what: str | Callable[[], str] = "condition",
    interval: float = 0.01,
) -> None:
    """Call ``condition`` every ``interval`` s until it is truthy; TimeoutError after ``timeout``.

    ``what`` names what was awaited in the error; a callable is asked at the timeout, so the
    message can show the state the test was stuck in.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            described = what() if callable(what) else what
            raise TimeoutError(f"{described} not met within {timeout} s")
        time.sleep(interval)
