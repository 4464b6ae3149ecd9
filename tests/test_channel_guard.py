"""The RM's channel against a hostile peer on its network (docs/security.md, "The channel"):
real sockets on this machine, a stand-in RM, and peers that speak the wire format by hand
(``rm/service/stream.py``) to do what a host never does."""

from __future__ import annotations

import asyncio
import os
import pickle

import pytest

from rayrm.rm.service.channel import MAX_FRAME, Channel, ChannelBroken, ChannelServer, _frame
from rayrm.rm.service.stream import HEADER, MAC, NONCE, Session, client_hello, server_proof

KEY = b"k" * 32
WAIT = 10.0
ran: list = []                     # what a crafted pickle ran, had it been unpickled


def _run_code(tag):
    ran.append(tag)
    return tag


class Payload:
    """Unpickling this runs ``_run_code``: any end that unpickles it has run a peer's code."""

    def __reduce__(self):
        return _run_code, ("ran",)


class FakeRM:
    def __init__(self):
        self.seen: list = []
        self.release = asyncio.Event()

    async def node_heartbeat(self, x):
        self.seen.append(x)
        return ("beat", x)

    async def allocate(self, x):
        self.seen.append(("allocate", x))
        await self.release.wait()
        return ("allocated", x)

    async def serve(self, call, *args):
        """What the channel calls, with a ``Call`` of the hosts' (rm/service/calls.py)."""
        return await getattr(self, call.value)(*args)


async def started(**limits) -> tuple[FakeRM, ChannelServer]:
    rm = FakeRM()
    server = ChannelServer(rm, KEY, **limits)
    await server.start("127.0.0.1")
    return rm, server


def channel(server: ChannelServer, key: bytes = KEY) -> Channel:
    async def resolve():
        return (*server.address, key)
    return Channel(resolve)


class Peer:
    """A raw connection that speaks the handshake and frames by hand."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer
        self.session: Session | None = None
        self.last = b""                          # the last frame the server sent, whole

    @classmethod
    async def open(cls, server: ChannelServer, source: str | None = None) -> "Peer":
        reader, writer = await asyncio.open_connection(*server.address, local_addr=(source, 0) if source else None)
        return cls(reader, writer)

    @classmethod
    async def proven(cls, server: ChannelServer, source: str | None = None, key: bytes = KEY) -> "Peer":
        peer = await cls.open(server, source)
        server_nonce = await asyncio.wait_for(peer.reader.readexactly(NONCE), WAIT)
        nonce, hello = client_hello(key, server_nonce)
        peer.writer.write(hello)
        assert await asyncio.wait_for(peer.reader.readexactly(MAC), WAIT) == server_proof(key, server_nonce, nonce)
        peer.session = Session(key, server_nonce, nonce, server=False)
        return peer

    def call_frame(self, seq: int, name: str, *args) -> bytes:
        return self.session.seal(pickle.dumps((seq, name, pickle.dumps(args))))

    async def closed(self) -> bool:
        """Whether the server closed the connection: EOF (b"") before WAIT seconds."""
        try:
            while await asyncio.wait_for(self.reader.read(65536), WAIT):
                pass
        except ConnectionError:
            pass
        return True

    async def answer(self):
        (n,) = HEADER.unpack(await asyncio.wait_for(self.reader.readexactly(HEADER.size), WAIT))
        data = await asyncio.wait_for(self.reader.readexactly(n + MAC), WAIT)
        assert self.session.check(data[:n], data[n:])
        self.last = HEADER.pack(n) + data
        return pickle.loads(data[:n])


def test_a_peer_that_never_completes_the_handshake_is_closed_at_the_deadline():
    async def main():
        _, server = await started(handshake_seconds=0.2)
        silent = await Peer.open(server)                    # connects, sends nothing
        trickle = await Peer.open(server)
        trickle.writer.write(b"\x00" * 10)                  # 10 of the 48 bytes of a hello
        assert await silent.closed() and await trickle.closed()
        assert server.refused == {"handshake": 2}
        assert server.stats()["connections"] == 0
    asyncio.run(main())


def test_the_per_peer_cap_evicts_the_oldest_handshake_then_refuses_when_all_are_proven():
    async def main():
        rm, server = await started(max_connections=10, max_per_peer=3)
        idle = [await Peer.open(server) for _ in range(3)]  # 3 of 3 slots of 127.0.0.1, none proven
        ch = channel(server)
        # the host's connection is the 4th: the oldest idle one (idle[0]) makes room
        assert await ch.call("node_heartbeat", 1) == ("beat", 1)
        assert await idle[0].closed()
        assert server.refused == {"cap": 1}
        proven = [await Peer.proven(server), await Peer.proven(server)]   # evict idle[1], idle[2]
        assert await idle[1].closed() and await idle[2].closed()
        # 3 proven connections of 127.0.0.1 (ch, proven[0], proven[1]): a 4th has no one to evict
        late = await Peer.open(server)
        assert await late.closed()
        assert server.refused == {"cap": 4}                 # idle[0..2] and late
        assert await ch.call("node_heartbeat", 2) == ("beat", 2)   # the proven ones go on
        proven[0].writer.write(proven[0].call_frame(1, "node_heartbeat", 3))
        assert await proven[0].answer() == (1, True, ("beat", 3))
        assert rm.seen == [1, 2, 3]
        ch.close()
    asyncio.run(main())


def test_the_total_cap_counts_every_address():
    async def main():
        _, server = await started(max_connections=3, max_per_peer=3)
        held = [await Peer.proven(server, "127.0.0.1"), await Peer.proven(server, "127.0.0.2"),
                await Peer.proven(server, "127.0.0.3")]
        # 3 connections from 3 addresses, one each: under the per-peer cap, at the total cap
        late = await Peer.open(server, "127.0.0.4")
        assert await late.closed()
        assert server.refused == {"cap": 1} and server.stats()["connections"] == 3
        for peer in held:
            peer.writer.close()
    asyncio.run(main())


def test_a_proven_connection_silent_with_no_call_out_is_closed_and_its_host_reconnects():
    async def main():
        rm, server = await started(idle_seconds=3600)       # sweeps run by hand below
        ch = channel(server)
        assert await ch.call("node_heartbeat", 1) == ("beat", 1)
        poller = await Peer.proven(server)
        poller.writer.write(poller.call_frame(1, "allocate", "held"))       # a long poll out
        trickler = await Peer.proven(server)
        frame = trickler.call_frame(1, "node_heartbeat", 2)
        trickler.writer.write(frame[:5])                   # a frame begun and never finished
        await asyncio.wait_for(_until(lambda: ("allocate", "held") in rm.seen), WAIT)
        server._sweep()                                     # notes each connection's frames
        server._sweep()                                     # none read since: ch and trickler close
        assert await trickler.closed()
        await asyncio.wait_for(ch._reading, WAIT)           # the host saw its connection end
        assert server.idle_closed == 2 and server.stats()["connections"] == 1   # the poller stays
        assert await ch.call("node_heartbeat", 3) == ("beat", 3)    # a new connection
        rm.release.set()
        assert await poller.answer() == (1, True, ("allocated", "held"))
        assert rm.seen == [1, ("allocate", "held"), 3]
        ch.close()
    asyncio.run(main())


def test_the_idle_sweep_runs_on_its_own():
    async def main():
        _, server = await started(idle_seconds=0.1)
        ch = channel(server)
        assert await ch.call("node_heartbeat", 1) == ("beat", 1)
        await asyncio.wait_for(ch._reading, WAIT)           # closed within 0.1-0.2 s of silence
        assert server.idle_closed == 1
    asyncio.run(main())


async def _until(condition):
    while not condition():
        await asyncio.sleep(0.01)


def test_a_frame_over_max_frame_is_refused_before_it_is_read():
    async def main():
        rm, server = await started()
        peer = await Peer.proven(server)
        peer.writer.write(HEADER.pack(MAX_FRAME + 1) + b"x" * 100)
        assert await peer.closed()
        assert server.refused == {"frame": 1} and rm.seen == []
    asyncio.run(main())


def test_the_largest_legitimate_frame_is_far_under_max_frame():
    """A host registering 10,000 NMs (bench_rm_throughput.py --nodes 10000, the largest
    cluster any benchmark runs) sends the largest frame a host sends: 640,346 bytes, 64 an
    NM (the memo shares the capacity's and attributes' keys and the Ray node id); MAX_FRAME
    (16 MiB = 16,777,216 bytes) is 26 times that."""
    from pathlib import Path

    from rayrm.rm.core.config import load_config
    from rayrm.rm.service.protocol import NodeRegistration

    cfg = load_config(Path(__file__).resolve().parents[1] / "configs" / "paper-micro.yaml")
    node = cfg.nodes[0]
    ray_node = "f" * 56                                    # a Ray node id's hex
    regs = [NodeRegistration(f"n{i:05d}", dict(node.capacity), dict(node.attributes), ray_node, 0)
            for i in range(10_000)]
    payload = pickle.dumps((1, "register_nodes", pickle.dumps(("nm-0", 1 << 52, regs), protocol=5)), protocol=5)
    assert 600_000 < len(payload) < 700_000 and 20 * len(payload) < MAX_FRAME, len(payload)


def test_the_client_sends_nothing_and_unpickles_nothing_from_a_server_without_the_key():
    async def main():
        got: list = []

        async def fake_rm(reader, writer):
            writer.write(os.urandom(NONCE))
            got.append(await reader.readexactly(NONCE + MAC))
            writer.write(os.urandom(MAC))                   # it cannot prove the key
            writer.write(_frame((1, True, Payload())))      # and answers with code
            got.append(await reader.read(65536))            # anything the client sends next
        server = await asyncio.start_server(fake_rm, "127.0.0.1", 0)
        address = server.sockets[0].getsockname()[:2]

        async def resolve():
            return (*address, KEY)
        ch = Channel(resolve)
        with pytest.raises(ChannelBroken, match="did not prove"):
            await ch.call("node_heartbeat", 1)
        await asyncio.wait_for(_until(lambda: len(got) == 2), WAIT)
        assert got[1] == b""                                # no call was sent
        assert ran == []
        server.close()
    asyncio.run(main())


def test_an_answer_that_fails_its_mac_breaks_the_connection_unread():
    async def main():
        async def forging_rm(reader, writer):               # knows the key, then forges
            nonce = os.urandom(NONCE)
            writer.write(nonce)
            hello = await reader.readexactly(NONCE + MAC)
            writer.write(server_proof(KEY, nonce, hello[:NONCE]))
            frame = _frame((1, True, Payload()))
            writer.write(frame + os.urandom(MAC))
        server = await asyncio.start_server(forging_rm, "127.0.0.1", 0)
        address = server.sockets[0].getsockname()[:2]

        async def resolve():
            return (*address, KEY)
        with pytest.raises(ChannelBroken):
            await Channel(resolve).call("node_heartbeat", 1)
        assert ran == []
        server.close()
    asyncio.run(main())


@pytest.mark.parametrize("attack", ["injected", "altered", "replayed", "other session", "reflected"])
def test_a_frame_that_is_not_the_peer_s_next_is_refused_unread(attack):
    async def main():
        rm, server = await started()
        peer = await Peer.proven(server)
        first = peer.call_frame(1, "node_heartbeat", 1)
        peer.writer.write(first)
        assert await peer.answer() == (1, True, ("beat", 1))
        if attack == "injected":                            # a well-formed frame with no MAC
            bad = _frame((2, "node_heartbeat", pickle.dumps((Payload(),)))) + bytes(MAC)
        elif attack == "altered":                           # one byte of the pickle flipped
            good = bytearray(peer.call_frame(2, "node_heartbeat", 2))
            good[HEADER.size + 10] ^= 1
            bad = bytes(good)
        elif attack == "replayed":                          # the first frame again
            bad = first
        elif attack == "other session":                     # a frame of another connection
            other = await Peer.proven(server)
            bad = other.call_frame(1, "node_heartbeat", 2)
        else:                                               # the server's own answer sent back
            bad = peer.last
        peer.writer.write(bad)
        assert await peer.closed()
        assert server.refused == {"frame": 1}
        assert rm.seen == [1] and ran == []
    asyncio.run(main())


def test_the_total_cap_leaves_three_quarters_of_the_descriptors_to_the_rm(monkeypatch):
    """A flood must never make the RM's own ``open`` (its journal) fail with EMFILE."""
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda _: (1024, 4096))
    # 1024 descriptors: at most 1024 // 4 = 256 connections, under MAX_CONNECTIONS = 512
    assert ChannelServer(FakeRM(), KEY).max_connections == 256
    monkeypatch.setattr(resource, "getrlimit", lambda _: (65536, 65536))
    assert ChannelServer(FakeRM(), KEY).max_connections == 512


def test_the_server_probes_its_peers_with_tcp_keepalive_and_logs_each_refusal(caplog):
    """A peer whose machine vanished (no FIN) is dropped by TCP keepalive on the server's
    side too: idle 2 s, then a probe a second, 3 unanswered (KEEPALIVE_IDLE)."""
    import socket

    async def main():
        _, server = await started(max_per_peer=1)
        ch = channel(server)
        assert await ch.call("node_heartbeat", 1) == ("beat", 1)
        (stream,) = server._streams
        sock = stream.transport.get_extra_info("socket")
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        if hasattr(socket, "TCP_KEEPIDLE"):
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 2
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == 3
        late = await Peer.open(server)                     # the address's one slot is proven
        assert await late.closed()
        ch.close()
    with caplog.at_level("WARNING", logger="rayrm.rm.service.channel"):
        asyncio.run(main())
    assert [r.getMessage() for r in caplog.records] == [
        "the RM's channel refused a connection from 127.0.0.1 (cap, 1 so far): 1 connections, 1 from 127.0.0.1"]
