"""``kill-am`` crashes only an attempt the RM tracks (``ApplicationMasterHost.kill_am``).

An AM still registering is left alone: the RM may not know its app yet, or, after its
host restarted, the app may have ended.  Crashed there, nobody would expire it or launch
its successor and the host's ``run`` would wait for it for ever (found under chaos at
paper scale: a ``kill-am`` of an app that had finished, landing while its restarted AM
host registered its apps again, held the replay until its no-progress bound ended it)."""

from __future__ import annotations

import asyncio
import time

import pytest

from rayrm.apps.am import AMJob
from rayrm.rm.core.clock import TraceClock
from rayrm.rm.core.model import AppSpec, Resources


@pytest.fixture(scope="module")
def silent_rm(local_ray):
    import ray

    @ray.remote(num_cpus=0)
    class SilentRM:
        """An RM that takes a registration and never answers it (on the RM's channel,
        as the real RM's hosts call it)."""

        def __init__(self):
            self.called = asyncio.Event()
            self.server = None

        async def channel(self):
            from rayrm.rm.service.channel import ChannelServer
            self.server = self.server or ChannelServer(self, b"key")
            return (*await self.server.start("127.0.0.1"), b"key")

        async def serve(self, call, *args):
            """Every call the channel serves: only a registration comes, and waits for ever."""
            assert call.value == "register_apps"
            self.called.set()
            await asyncio.Event().wait()

        async def registering(self) -> bool:
            await self.called.wait()
            return True

    rm = SilentRM.remote()
    yield rm
    ray.kill(rm)


def test_an_am_still_registering_is_not_crashed(silent_rm):
    import ray

    from rayrm.apps.am import ApplicationMasterHost
    job = AMJob(AppSpec("j", Resources(cpu=1, memory_mb=512), 2, submit=0.0), (5.0, 5.0))
    host = ApplicationMasterHost.options(num_cpus=0).remote("am-0", silent_rm, {}, [job], interval_wall=0.1)
    run = host.run.remote(TraceClock(time.time(), 1.0))               # submits j at once: it registers, unanswered
    assert ray.get(silent_rm.registering.remote(), timeout=60)
    assert ray.get(host.kill_am.remote("j"), timeout=60) is False
    out = ray.get(host.outcome_now.remote(), timeout=60)
    assert out["crashes"] == 0 and out["apps"]["j"]["state"] == "registering"
    ray.cancel(run, force=False)
    ray.kill(host)
