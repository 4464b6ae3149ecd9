"""The garbage collector of the protocol's long-lived actors (the RM, NM and AM hosts).

CPython's cyclic collector runs a full collection of the whole heap each time the objects
surviving into its oldest generation grow by a quarter.  The RM's heap grows all run long
(the run log, every container's record), so at paper scale each such pass walks millions
of objects that are never garbage while the loop waits (every NM and AM call queued on it
pays it as latency), and the young generation is collected every 700 allocations of a
message-building loop.  The actors instead collect
the young generations rarely (every ``YOUNG`` allocations) and the oldest never on their
own: what they keep is held by the state, and the cyclic garbage they make (asyncio
futures, exceptions) dies young, where the young collections still reclaim it.  As the
simulator, which runs with the collector off.
"""

from __future__ import annotations

import gc

#: allocations between two collections of the youngest generation (CPython's default is 700)
YOUNG = 20_000


def quiet_gc() -> None:
    """Collect what the actor's construction left, freeze the survivors out of every later
    collection, and collect the young generations every ``YOUNG`` allocations, the oldest
    never on its own (module docstring)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG, 20, 1 << 30)
