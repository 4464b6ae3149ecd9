"""How often an NM host calls the RM (nodes/host.py): a host with nothing to report calls
once per heartbeat interval, every NM it runs in each call."""

from __future__ import annotations

import asyncio

from rayrm.nodes.host import NodeManagerHost
from rayrm.rm.core.model import NodeSpec, Resources
from rayrm.rm.service.client import Link
from rayrm.rm.service.protocol import NORMAL


class QuietRM:
    """Stands in for the host's RMClient: registers every NM, answers every heartbeat with
    nothing, and records how many NM beats each one's mark counted."""

    def __init__(self, calls: int):
        self.link = Link("nm-0")                   # a link with no fault on it
        self.seen: list[int] = []
        self.enough = asyncio.Event()
        self.calls = calls

    async def register_nodes(self, regs):
        return [NORMAL] * len(regs)

    async def node_heartbeat(self, beats, idle=(), mark=None):
        assert beats == [] and idle == ()          # nothing to report: the mark carries them all
        self.seen.append(mark.beats)
        if len(self.seen) >= self.calls:
            self.enough.set()
        return []


def test_a_quiet_host_calls_once_an_interval_with_every_nm_in_it():
    interval, n = 0.05, 40
    specs = [NodeSpec(f"n{i}", Resources({"cpu": 1.0}), {}) for i in range(n)]

    async def main():
        host = NodeManagerHost.__ray_metadata__.modified_class(
            "nm-0", object(), specs, "ab" * 28, interval_wall=interval)     # a Ray node id's form
        host.rm = rm = QuietRM(calls=21)
        await host.register()
        await asyncio.wait_for(rm.enough.wait(), 60.0)
        await host.stop()
        return rm.seen
    seen = asyncio.run(main())
    # the 40 NMs are dealt into interval / window = 50 / 5 = 10 slots, 5 ms apart.  A call
    # that takes only the slots due before the next call may start (the 10 ms call gap)
    # carries two or three slots, 8-12 NMs' beats, in its mark, five calls an interval (12
    # each, measured with that rule put back); a quiet call takes the slots of a whole
    # interval, all 40 NMs but those at its edges.  A late loop makes a call take more
    # slots, never fewer
    beats = sorted(seen[1:])
    assert beats[len(beats) // 2] >= 30, beats
