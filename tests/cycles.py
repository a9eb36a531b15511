"""What only the cycle collector would free: run some work with the collector off, then
name the types of what it left in reference cycles."""

from __future__ import annotations

import gc
from collections.abc import Callable


def left_in_cycles(work: Callable[[], object]) -> set[str]:
    """The type names of what ``work`` left that reference counting alone did not free."""
    gc.collect()  # what earlier work left is not counted
    gc.disable()
    try:
        work()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        return {type(thing).__qualname__ for thing in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
