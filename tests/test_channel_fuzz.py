"""A hostile peer on the RM's network during a real replay (docs/security.md, "The channel").

The config is samples.SMALL (four nodes, j1 = 20 tasks and j2 = 10 tasks) at time scale
0.2, so that the replay lasts some 20 wall seconds.  While it runs, a fuzzer on this
machine learns the RM's channel address (and, for the attacks that need a proven
connection, its key, as a member of the Ray cluster would) and sends, again and again:

* without the key: random bytes as a hello; a hello trickled a byte at a time; a flood of
  idle connections, more than the per-address cap of 64;
* with the key, after a correct handshake: garbage with a well-formed length; a frame cut
  short and the connection closed; a frame announcing more than MAX_FRAME; a frame whose
  MAC is wrong trickled a byte at a time; a correct frame sent twice on its connection
  and once on another.

Every one is refused (counted in summary.json's ``channel.refused``), the replay finishes
with all 30 tasks done once, and ``rayrm check`` passes.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import threading

import pytest

ray = pytest.importorskip("ray")

from samples import SMALL, small_config  # noqa: E402

from rayrm.rm.runs.check import check_run  # noqa: E402
from rayrm.rm.runtime.driver import replay  # noqa: E402
from rayrm.rm.service.channel import MAX_FRAME, MAX_PER_PEER  # noqa: E402
from rayrm.rm.service.protocol import NAMESPACE, RM_NAME  # noqa: E402
from rayrm.rm.service.stream import HEADER, MAC, NONCE, Session, client_hello, server_proof  # noqa: E402

FLOOD = MAX_PER_PEER + 16
ROUNDS = 3


class Fuzzer:
    """Runs ROUNDS rounds of the attacks on its own loop in a thread; counts what it sent."""

    def __init__(self):
        self.sent = {"key": 0, "frame": 0, "flood": 0}
        self.rounds = 0
        self.error: BaseException | None = None
        self.stop = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    async def _main(self) -> None:
        host, port, key = await self._address()
        self.address, self.key = (host, port), key
        while self.rounds < ROUNDS:
            await self._round()
            self.rounds += 1
        self.done.set()

    async def _address(self):
        while not self.stop.is_set():
            try:
                rm = ray.get_actor(RM_NAME, namespace=NAMESPACE)
                return await rm.channel.remote()
            except ValueError:                       # not created yet
                await asyncio.sleep(0.05)
        raise RuntimeError("the replay ended before the RM started")

    async def _open(self):
        return await asyncio.open_connection(*self.address)

    async def _proven(self):
        reader, writer = await self._open()
        server_nonce = await reader.readexactly(NONCE)
        nonce, hello = client_hello(self.key, server_nonce)
        writer.write(hello)
        assert await reader.readexactly(MAC) == server_proof(self.key, server_nonce, nonce)
        return reader, writer, Session(self.key, server_nonce, nonce, server=False)

    async def _refused(self, reader, writer) -> None:
        """Until the RM closes the connection (EOF or reset)."""
        try:
            while await asyncio.wait_for(reader.read(65536), 30):
                pass
        except ConnectionError:
            pass
        writer.close()

    async def _round(self) -> None:
        reader, writer = await self._open()                 # garbage as a hello
        await reader.readexactly(NONCE)
        writer.write(os.urandom(NONCE + MAC))
        await self._refused(reader, writer)
        self.sent["key"] += 1

        reader, writer = await self._open()                 # a hello trickled
        await reader.readexactly(NONCE)
        for byte in os.urandom(NONCE + MAC):
            writer.write(bytes([byte]))
            await asyncio.sleep(0.01)
        await self._refused(reader, writer)
        self.sent["key"] += 1

        flood = [await self._open() for _ in range(FLOOD)]  # idle connections past the cap
        self.sent["flood"] += FLOOD

        for attack in ("garbage", "oversized", "trickled", "replayed"):
            reader, writer, session = await self._proven()
            if attack == "garbage":
                writer.write(HEADER.pack(100) + os.urandom(100 + MAC))
            elif attack == "oversized":
                writer.write(HEADER.pack(MAX_FRAME + 1))
            elif attack == "trickled":
                frame = bytearray(session.seal(pickle.dumps((1, "node_heartbeat", pickle.dumps(())))))
                frame[-1] ^= 1
                for i in range(len(frame)):
                    writer.write(frame[i:i + 1])
                    await asyncio.sleep(0.001)
            else:
                # a call the channel does not serve: answered with an error, changes nothing
                frame = session.seal(pickle.dumps((1, "export", pickle.dumps(()))))
                writer.write(frame)
                (n,) = HEADER.unpack(await reader.readexactly(HEADER.size))
                answer = await reader.readexactly(n + MAC)
                assert session.check(answer[:n], answer[n:])
                other = await self._proven()
                other[1].write(frame)                        # on another connection
                await self._refused(other[0], other[1])
                self.sent["frame"] += 1
                writer.write(frame)                          # and again on its own
            await self._refused(reader, writer)
            self.sent["frame"] += 1

        reader, writer, session = await self._proven()      # a frame cut short, then gone
        writer.write(session.seal(pickle.dumps((1, "node_heartbeat", pickle.dumps(()))))[:20])
        writer.close()
        for _, w in flood:
            w.close()


def test_a_replay_under_a_hostile_peer_refuses_everything_and_loses_nothing(local_ray, tmp_path):
    cfg = small_config(run=dict(SMALL["run"], time_scale=0.2))
    fuzzer = Fuzzer()
    fuzzer.thread.start()
    try:
        summary = replay(cfg, out=tmp_path, progress=False)
        finished_in_time = fuzzer.done.is_set()
    finally:
        fuzzer.stop.set()
        fuzzer.thread.join(60)
    assert fuzzer.error is None, repr(fuzzer.error)
    assert finished_in_time                            # every attack met a running RM
    refused = summary["channel"]["refused"]
    # each round: 2 wrong hellos ("key"); 5 refused frames (garbage, oversized, trickled,
    # the replayed frame on another connection and on its own); 80 idle connections, where
    # the 2 hosts' proven ones leave 62 slots of the address: at least 18 evicted ("cap")
    assert fuzzer.sent == {"key": 2 * ROUNDS, "frame": 5 * ROUNDS, "flood": FLOOD * ROUNDS}
    assert refused["key"] == 2 * ROUNDS and refused["frame"] == 5 * ROUNDS
    assert refused["cap"] >= ROUNDS * (FLOOD + 2 - MAX_PER_PEER)
    result = check_run(tmp_path)
    assert result.ok, result.report()
    assert summary["tasks"]["finished"] == 30 and summary["tasks_finished_twice"] == 0
    assert summary["jobs"] == {"finished": 2}                # j1 and j2, none failed
