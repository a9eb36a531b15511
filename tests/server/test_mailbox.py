"""The loop's mailbox (``conveyor.wakeups``): callbacks posted from any thread run on the
loop in posting order, and only a post from another thread wakes the loop through its
self-pipe (a ``--workers`` front end completes its answers on the loop's own thread)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from conveyor.wakeups import mailbox


def test_posts_run_in_order_and_only_another_threads_post_wakes_the_loop() -> None:
    loop = asyncio.new_event_loop()
    wakeups: list[Any] = []
    threadsafe = loop.call_soon_threadsafe

    def counted(*args: Any) -> Any:  # the real method, counted
        wakeups.append(args)
        return threadsafe(*args)

    loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
    ran: list[int] = []

    async def scenario() -> None:
        box = mailbox(loop)
        box.post(ran.append, 1)  # from the loop's own thread
        box.post(ran.append, 2)
        for _ in range(100):  # bounded: a few turns of the loop
            if len(ran) == 2:
                break
            await asyncio.sleep(0)
        assert ran == [1, 2]
        assert wakeups == []  # no self-pipe write for the loop's own posts
        other = threading.Thread(target=lambda: (box.post(ran.append, 3), box.post(ran.append, 4)))
        other.start()
        other.join(timeout=5)  # the loop is held here: both posts land before it runs
        for _ in range(500):
            if len(ran) == 4:
                break
            await asyncio.sleep(0.01)

    try:
        loop.run_until_complete(asyncio.wait_for(scenario(), timeout=10))
    finally:
        loop.close()
    assert ran == [1, 2, 3, 4]
    assert len(wakeups) == 1  # the other thread's two posts share one wakeup
