"""The cyclic garbage collector paused over work that builds many acyclic objects."""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def paused_gc():
    """Pause the cyclic collector for the block; re-enable it after only if it was on.

    A config's parse and a simulation allocate hundreds of thousands of small objects that
    reference counting frees on its own (rows, specs, events, none in a cycle); every 700 of
    them the collector would walk the young ones, and each full collection every object
    alive. On the paper-scale trace that is about a third of ``load_config``'s time and
    about 10% of a simulation's.  Nested pauses leave the collector off until the outer one ends.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
