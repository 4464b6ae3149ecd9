"""The hosts' channel to the RM (rm/service/channel.py), without Ray: a real TCP server and
client on this machine, and a stand-in RM whose methods record what reached them."""

from __future__ import annotations

import asyncio
import os
import pickle

import pytest

from rayrm.rm.service.channel import Channel, ChannelBroken, ChannelServer
from rayrm.rm.service.calls import Call


class FakeRM:
    """Stands in for the RM actor, whose ``serve`` the channel calls with a ``Call``:
    ``node_heartbeat`` records its argument and answers at once; ``allocate`` holds its
    answer until ``release`` is set (a long poll)."""

    def __init__(self):
        self.seen: list = []
        self.release = asyncio.Event()
        self.polled = asyncio.Event()

    async def node_heartbeat(self, x):
        self.seen.append(x)
        return ("beat", x)

    async def allocate(self, x):
        self.seen.append(("allocate", x))
        self.polled.set()
        await self.release.wait()
        return ("allocated", x)

    async def register_apps(self, x):
        raise ValueError(f"bad app {x}")

    async def serve(self, call: Call, *args):
        return await getattr(self, call.value)(*args)

    async def export(self):                 # a method the channel must not serve
        self.seen.append("export")
        return "everything"


async def started(rm: FakeRM, key: bytes) -> ChannelServer:
    server = ChannelServer(rm, key)
    await server.start("127.0.0.1")
    return server


def resolver(server: ChannelServer, key: bytes | None = None, asked: list | None = None):
    async def resolve():
        if asked is not None:
            asked.append(server.address)
        return (*server.address, server.key if key is None else key)
    return resolve


def test_calls_start_in_the_order_sent_and_a_long_poll_holds_no_other_call():
    async def main():
        rm = FakeRM()
        server = await started(rm, os.urandom(32))
        ch = Channel(resolver(server))
        poll = asyncio.ensure_future(ch.call("allocate", "a"))
        beats = await asyncio.gather(*(ch.call("node_heartbeat", i) for i in range(100)))
        assert not poll.done()               # the 100 beats were answered past the held poll
        rm.release.set()
        assert await poll == ("allocated", "a")
        assert beats == [("beat", i) for i in range(100)]
        assert rm.seen == [("allocate", "a")] + list(range(100))
        assert server.calls == 101
        ch.close()
    asyncio.run(main())


def test_the_rm_s_error_is_raised_in_the_caller_and_only_the_protocol_is_served():
    async def main():
        rm = FakeRM()
        server = await started(rm, os.urandom(32))
        ch = Channel(resolver(server))
        with pytest.raises(ValueError, match="bad app 7"):
            await ch.call("register_apps", 7)
        with pytest.raises(AttributeError, match="serves no call 'export'"):
            await ch.call("export")
        assert "export" not in rm.seen
        assert await ch.call("node_heartbeat", 1) == ("beat", 1)   # the connection goes on
        ch.close()
    asyncio.run(main())


def test_a_client_without_the_key_is_refused_before_anything_is_unpickled():
    async def main():
        rm = FakeRM()
        server = await started(rm, b"k" * 32)
        ch = Channel(resolver(server, key=b"x" * 32))
        with pytest.raises(ChannelBroken):
            await ch.call("node_heartbeat", 1)
        assert rm.seen == [] and server.calls == 0 and server.refused == {"key": 1}
    asyncio.run(main())


def test_calls_out_when_the_rm_dies_fail_and_the_next_call_finds_the_new_rm():
    async def main():
        rm, key = FakeRM(), os.urandom(32)
        servers = [await started(rm, key)]
        asked: list = []

        async def resolve():                   # what the Ray call rm.channel answers
            asked.append(servers[-1].address)
            return (*servers[-1].address, key)
        ch = Channel(resolve)
        assert await ch.call("node_heartbeat", 1) == ("beat", 1)
        poll = asyncio.ensure_future(ch.call("allocate", "held"))
        await asyncio.wait_for(rm.polled.wait(), 5)     # the poll reached the RM
        servers[0].close()                     # the RM dies: its socket and connections close
        with pytest.raises(ChannelBroken):
            await asyncio.wait_for(poll, 5)
        servers.append(await started(FakeRM(), key))   # the restarted RM, at another port
        assert await ch.call("node_heartbeat", 2) == ("beat", 2)
        assert asked == [servers[0].address, servers[1].address]
        assert servers[1].calls == 1
        ch.close()
    asyncio.run(main())


class JournalingRM:
    """Reads the arguments' bytes the server offers (``ChannelServer.wire``) as the RM's
    journal does."""

    def __init__(self):
        self.server: ChannelServer | None = None
        self.read: list = []

    async def serve(self, call: Call, *args):
        return await getattr(self, call.value)(*args)

    async def node_heartbeat(self, *args):
        wire = self.server.wire(Call.NODE_HEARTBEAT)      # by the Call member, as the RM's journal asks
        self.read += [(pickle.loads(wire), args), self.server.wire(Call.NODE_HEARTBEAT)]
        return "ok"

    async def allocate(self, *args):
        self.read.append(self.server.wire("register_apps"))    # another call's name
        await asyncio.sleep(0)
        self.read.append(self.server.wire("allocate"))          # after its first wait
        return "ok"


def test_a_call_is_offered_its_arguments_bytes_once_and_only_until_it_first_waits():
    async def main():
        rm = JournalingRM()
        rm.server = await started(rm, os.urandom(32))
        ch = Channel(resolver(rm.server))
        args = ("nm-0", 7, [("n1", (1, 2))], (), 1.5, None)
        assert await ch.call("node_heartbeat", *args) == "ok"
        assert await ch.call("allocate", "am-0", 8) == "ok"
        # the bytes are those arguments (a journal replays them as the call got them); a
        # second read in the same start, another call's name, or a read after a wait: none
        assert rm.read == [(args, args), None, None, None]
        ch.close()
    asyncio.run(main())
