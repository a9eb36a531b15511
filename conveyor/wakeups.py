"""Callbacks from other threads onto an event loop, one wakeup for many.

An engine thread that completes a request must get its answer to the event loop that
serves the client. ``loop.call_soon_threadsafe`` does that with a write to the loop's
self-pipe per call: one system call, and one more read by the loop, for every request.
Under load, many requests complete while the loop is busy with others, so a
:class:`Mailbox` posts each callback into a list and wakes the loop only when the list
was empty: the loop runs everything posted since, in order, in one iteration. A post
from the loop's own thread needs no wakeup at all.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable
from typing import Any

_mailboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Mailbox] = (
    weakref.WeakKeyDictionary()
)
_mailboxes_lock = threading.Lock()


class Mailbox:
    """Callbacks for one loop, posted from any thread; run on the loop in posting order."""

    __slots__ = ("__weakref__", "_lock", "_loop", "_posted", "_waking")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._posted: list[tuple[Callable[[Any], object], Any]] = []
        self._waking = False  # a wakeup is on its way: later posts ride on it

    def post(self, callback: Callable[[Any], object], argument: Any) -> None:
        """Run ``callback(argument)`` on the loop soon; callable from any thread."""
        with self._lock:
            self._posted.append((callback, argument))
            if self._waking:
                return
            self._waking = True
        try:
            if asyncio._get_running_loop() is self._loop:
                # Posted on the loop's own thread (a --workers front end's answers arrive
                # on it): the loop runs the list in its next turn, with no self-pipe write.
                self._loop.call_soon(self._run)
            else:
                self._loop.call_soon_threadsafe(self._run)
        except RuntimeError:  # the loop is closed: nobody is left to run it
            with self._lock:
                self._waking = False

    def _run(self) -> None:
        with self._lock:
            posted, self._posted = self._posted, []
            self._waking = False
        for callback, argument in posted:
            try:
                callback(argument)
            except Exception as exc:  # one callback's bug must not lose the others
                self._loop.call_exception_handler(
                    {"message": "a posted callback failed", "exception": exc}
                )


def mailbox(loop: asyncio.AbstractEventLoop) -> Mailbox:
    """The mailbox of ``loop`` (made on first use, gone with the loop)."""
    found = _mailboxes.get(loop)
    if found is None:
        with _mailboxes_lock:
            found = _mailboxes.get(loop)
            if found is None:
                found = _mailboxes[loop] = Mailbox(loop)
    return found
