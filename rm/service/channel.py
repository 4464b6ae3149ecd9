"""The hosts' calls to the ResourceManager over one TCP stream each, beside Ray.

A Ray actor call costs each of its two ends about a millisecond of CPU on a small machine
(``benchmarks/bench_channel.py``), whatever it carries: the task is specified, sent over
gRPC, handed from the receiving worker's main thread to its event loop, and its answer is
stored and sent back the same way.  At the paper's scale
(1,000 NMs, 0.02 wall seconds per trace second) the RM answers some 200 calls a wall
second, and that work was most of the RM's CPU and more of its hosts' (docs/replay.md,
"The RM's channel").  The channel carries the same calls, with the same arguments and
answers, as length-prefixed pickles on an asyncio stream: a frame is read, the RM's own
method runs on its event loop, the answer is written back.

* **Server** (``ChannelServer``, in the RM actor).  Listens on the RM's node address, on a
  port the system picks, and serves only ``CALLS``.  A connection starts with a mutual
  challenge, and every frame after it carries a MAC under a key of that session
  (``rm/service/stream.py``): nothing is unpickled from a peer that has not proven the
  key, nor any frame whose MAC fails.  The key is made by the RM process and handed out
  only through a Ray call (``ResourceManager.channel``), so the channel is as closed as
  the Ray cluster is.  What a peer without the key can still do is hold connections open;
  that is bounded (``Admission``): a handshake not done within ``HANDSHAKE_SECONDS``
  closes, at most ``max_connections`` in all and ``max_per_peer`` from one address (at
  the cap the oldest connection still in its handshake makes room, else the new one is
  refused), a proven connection with no frame and no call out for ``idle_seconds`` is
  closed (its host reconnects on its next call), and TCP keepalive drops peers that
  vanished.  Every refusal is counted by kind and logged (``ChannelServer.stats``, the
  replay's summary.json ``channel``).  The server is an asyncio ``Protocol``: a
  call starts in the callback that read its frame and, unless it waits (a long poll), is
  answered there too — no stream reader, task or extra turn of the loop per call, which
  halved the server's CPU per call 2 ms apart (``bench_channel.py``: 153 → 87 µs, a bare
  echo 90).
* **The arguments' bytes.**  A call's frame carries its arguments pickled on their own
  (``(seq, name, pickle of args)``), and while the call starts the server keeps those
  bytes (``wire``): the RM journals them as they came (``ResourceManager._journal``)
  instead of pickling the same arguments a second time — a tenth of the RM's CPU at
  paper scale went to that.
* **Order.** Frames of one connection start their calls in the order they were sent, as
  Ray starts an actor's calls from one caller; calls may overlap (a long-polling
  ``allocate`` does not hold the next call), so answers carry the call's number.
* **Client** (``Channel``, ``rm/service/stream.py``).  Connects on first use,
  asking ``resolve`` (a Ray call to the RM) where to, and sends nothing before the server
  has proven the key.  When the RM dies its connections close (when its machine dies, TCP
  keepalive gives up on them within about five seconds): every call out on them fails with
  ``ChannelBroken``, which callers treat as Ray's ``RayActorError`` (retry with the same
  request id, ``rm/service/client.py``), and the next call resolves the restarted RM's new
  address.  Nothing the protocol promises changes: what is journaled before it is answered,
  idempotent retries and fencing are the RM's, whichever way a call arrives.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import resource
from collections import Counter

from rayrm.rm.service.calls import HOST_CALLS
from rayrm.rm.service.stream import (CLIENT_HELLO, HANDSHAKE_SECONDS, HEADER, MAC, MAX_FRAME, NONCE,  # noqa: F401
                                     Channel, ChannelBroken, ChannelMethod, Session, client_proof, keepalive,
                                     proven, server_proof)

#: the names of the calls the channel serves: the hosts' (rm/service/calls.py)
CALLS = frozenset(HOST_CALLS)
_HEADER = HEADER
#: connections at once, in all and from one address; at most a quarter of the process's
#: file descriptors, so that a flood never makes the RM's own ``open`` (its journal) fail
MAX_CONNECTIONS = 512
MAX_PER_PEER = 64
#: wall seconds a proven connection may go without a frame while no call of it is out
IDLE_SECONDS = 120.0
#: refusals of each kind logged one by one; after that, one line every LOG_EVERY
LOG_FIRST, LOG_EVERY = 5, 1000

log = logging.getLogger(__name__)

__all__ = ["CALLS", "MAX_FRAME", "Channel", "ChannelBroken", "ChannelMethod", "ChannelServer"]


def _frame(obj) -> bytes:
    """``obj`` pickled behind its length, without a MAC (the benchmarks' bare streams)."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


def _descriptor_cap() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return MAX_CONNECTIONS if soft == resource.RLIM_INFINITY else max(8, min(MAX_CONNECTIONS, soft // 4))


class ChannelServer:
    """Serves ``CALLS`` on a TCP port (module docstring): each through ``target.serve(call,
    *args)``, a coroutine (the RM actor's).

    ``stats()``: calls served, refusals by kind (``key``: a wrong proof; ``handshake``: no
    proof within the deadline, or a garbled hello; ``cap``: a connection past a cap;
    ``frame``: an oversized, garbled or unauthenticated frame from a proven peer),
    connections closed idle, and the largest frame read and written."""

    def __init__(self, target, key: bytes, *, max_connections: int | None = None,
                 max_per_peer: int = MAX_PER_PEER, handshake_seconds: float = HANDSHAKE_SECONDS,
                 idle_seconds: float = IDLE_SECONDS):
        self.target, self.key = target, key
        self.max_connections = _descriptor_cap() if max_connections is None else max_connections
        self.max_per_peer, self.handshake_seconds, self.idle_seconds = max_per_peer, handshake_seconds, idle_seconds
        self.server: asyncio.base_events.Server | None = None
        self.address: tuple[str, int] | None = None
        self._starting: asyncio.Lock | None = None
        self._streams: dict[_ServerStream, None] = {}    # open connections, oldest first
        self._peers: Counter = Counter()                 # open connections per address
        self._running: set[asyncio.Task] = set()    # held: the loop keeps only weak references
        self._sweeper: asyncio.TimerHandle | None = None
        self.calls = 0
        self.refused: Counter = Counter()
        self.idle_closed = 0
        self.largest_in = self.largest_out = 0
        self._wire: tuple[str, bytes] | None = None    # (name, pickled args) of the call starting

    async def start(self, host: str) -> tuple[str, int]:
        """Listen on ``host`` (the RM's node address), a free port; returns (host, port)."""
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self.server is None:
                loop = asyncio.get_running_loop()
                self.server = await loop.create_server(lambda: _ServerStream(self), host, 0)
                self.address = (host, self.server.sockets[0].getsockname()[1])
                self._sweeper = loop.call_later(self.idle_seconds, self._sweep)
        return self.address

    def close(self) -> None:
        """Stop listening and close every connection (the callers' calls out fail)."""
        if self.server is not None:
            self.server.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
        for stream in list(self._streams):
            stream.close()

    def stats(self) -> dict:
        return {"calls": self.calls, "connections": len(self._streams), "refused": dict(sorted(self.refused.items())),
                "idle_closed": self.idle_closed, "largest_frame_in": self.largest_in,
                "largest_frame_out": self.largest_out}

    # ----- admission -----------------------------------------------------------------

    def admit(self, stream: "_ServerStream") -> bool:
        """Take a new connection under the caps: past one, the oldest connection still in
        its handshake (from the same address, for the per-address cap) is closed to make
        room; if there is none, the new one is refused."""
        peer = stream.peer
        while len(self._streams) >= self.max_connections or self._peers[peer] >= self.max_per_peer:
            mine = self._peers[peer] >= self.max_per_peer
            oldest = next((s for s in self._streams if s.session is None and (not mine or s.peer == peer)), None)
            if oldest is None:
                self.refuse(stream, "cap", f"{len(self._streams)} connections, {self._peers[peer]} from {peer}")
                return False
            self.refuse(oldest, "cap", "its handshake made room for a newer connection")
        self._streams[stream] = None
        self._peers[peer] += 1
        return True

    def forget(self, stream: "_ServerStream") -> None:
        if self._streams.pop(stream, 0) is None:
            self._peers[stream.peer] -= 1
            if not self._peers[stream.peer]:
                del self._peers[stream.peer]

    def refuse(self, stream: "_ServerStream", kind: str, why: str) -> None:
        """Close ``stream``, counting and logging the refusal (the first few of each kind,
        then one in ``LOG_EVERY``: a flood must not flood the log)."""
        self.refused[kind] += 1
        n = self.refused[kind]
        if n <= LOG_FIRST or n % LOG_EVERY == 0:
            log.warning("the RM's channel refused a connection from %s (%s, %d so far): %s", stream.peer, kind, n, why)
        stream.close()

    def _sweep(self) -> None:
        """Close the proven connections that read no frame since the last sweep and have no
        call out: between one and two ``idle_seconds`` of silence."""
        for stream in list(self._streams):
            if stream.session is not None and stream.frames == stream.swept and not stream.out:
                self.idle_closed += 1
                stream.close()
            stream.swept = stream.frames
        self._sweeper = asyncio.get_running_loop().call_later(self.idle_seconds, self._sweep)

    # ----- calls ---------------------------------------------------------------------

    def wire(self, name: str) -> bytes | None:
        """The pickled arguments of call ``name`` if it is the one starting now (module
        docstring), once: a second record in the same start (a tick the call ran) gets None."""
        wire, self._wire = self._wire, None
        return wire[1] if wire is not None and wire[0] == name else None

    def dispatch(self, stream: "_ServerStream", seq: int, name: str, args: tuple, wire: bytes) -> None:
        """Start call ``seq`` as its frame is read, and answer it as soon as it is done.

        The RM's methods are coroutines that, but for a long poll, never wait: each is run
        here, in the callback that read its frame, up to its first wait (as Python 3.12's
        eager tasks do), so a call that does not wait costs no task and no turn of the
        loop.  One that waits goes on in a task (``_Rest``).  ``wire``: ``args`` pickled,
        offered to the call until its first wait."""
        self.calls += 1
        stream.out += 1
        try:
            call = HOST_CALLS.get(name)
            if call is None:
                raise AttributeError(f"the RM's channel serves no call {name!r}")
            coro = self.target.serve(call, *args)
        except Exception as e:  # noqa: BLE001 - the caller raises it, as a Ray call would
            stream.answer(seq, name, False, e)
            return
        self._wire = (name, wire)
        try:
            waiting = coro.send(None)
        except StopIteration as done:
            stream.answer(seq, name, True, done.value)
        except Exception as e:  # noqa: BLE001
            stream.answer(seq, name, False, e)
        else:
            task = asyncio.get_running_loop().create_task(self._finish(stream, seq, name, _Rest(coro, waiting)))
            self._running.add(task)
            task.add_done_callback(self._running.discard)
        finally:
            self._wire = None

    @staticmethod
    async def _finish(stream: "_ServerStream", seq: int, name: str, rest: "_Rest") -> None:
        try:
            value = await rest
        except Exception as e:  # noqa: BLE001
            stream.answer(seq, name, False, e)
        else:
            stream.answer(seq, name, True, value)


class _Rest:
    """The rest of a coroutine started by hand that is waiting on ``waiting`` (what it
    yielded): awaited in a task, it first waits for that, then runs the coroutine on."""

    __slots__ = ("coro", "waiting")

    def __init__(self, coro, waiting):
        self.coro, self.waiting = coro, waiting

    def __await__(self):
        yield self.waiting
        return (yield from self.coro.__await__())


class _ServerStream(asyncio.Protocol):
    """One host's connection on the server: the handshake (``rm/service/stream.py``), then
    frames whose MAC checks, each call started in the callback that read it
    (``ChannelServer.dispatch``), so calls start in the order they were sent."""

    def __init__(self, server: ChannelServer):
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.nonce = os.urandom(NONCE)
        self.session: Session | None = None
        self.deadline: asyncio.TimerHandle | None = None
        self.buf = bytearray()
        self.frames = self.swept = 0     # frames read; and at the last idle sweep
        self.out = 0                     # calls started and not yet answered

    def connection_made(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if peer else ""
        if not self.server.admit(self):
            return
        keepalive(transport)
        self.deadline = asyncio.get_running_loop().call_later(self.server.handshake_seconds, self._late)
        transport.write(self.nonce)

    def connection_lost(self, exc) -> None:
        self.close()

    def close(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
        self.server.forget(self)
        self.transport.close()

    def _late(self) -> None:
        if self.session is None:
            self.server.refuse(self, "handshake", f"no proof within {self.server.handshake_seconds:g} s")

    def _hello(self) -> bool:
        """The client's nonce and proof, once whole: a wrong one closes the connection."""
        buf = self.buf
        if len(buf) < CLIENT_HELLO:
            return False
        client_nonce, proof = bytes(buf[:NONCE]), bytes(buf[NONCE:CLIENT_HELLO])
        if not proven(client_proof(self.server.key, self.nonce, client_nonce), proof):
            self.server.refuse(self, "key", "a wrong proof of the key")
            return False
        del buf[:CLIENT_HELLO]
        self.deadline.cancel()
        self.session = Session(self.server.key, self.nonce, client_nonce, server=True)
        self.transport.write(server_proof(self.server.key, self.nonce, client_nonce))
        return True

    def data_received(self, data: bytes) -> None:
        buf, transport = self.buf, self.transport
        buf += data
        if self.session is None and not self._hello():
            return
        while len(buf) >= HEADER.size and not transport.is_closing():
            (n,) = HEADER.unpack_from(buf)
            if n > MAX_FRAME:
                self.server.refuse(self, "frame", f"a frame of {n} bytes")
                return
            end = HEADER.size + n + MAC
            if len(buf) < end:
                return
            payload = bytes(buf[HEADER.size:HEADER.size + n])
            if not self.session.check(payload, bytes(buf[HEADER.size + n:end])):
                self.server.refuse(self, "frame", "a frame failed its MAC")
                return
            try:
                seq, name, wire = pickle.loads(payload)
                args = pickle.loads(wire)
            except Exception:  # noqa: BLE001 - a garbled stream ends; its caller reconnects
                self.server.refuse(self, "frame", "a frame that does not unpickle")
                return
            del buf[:end]
            self.frames += 1
            if n > self.server.largest_in:
                self.server.largest_in = n
            self.server.dispatch(self, seq, name, args, wire)

    def answer(self, seq: int, name: str, ok: bool, value) -> None:
        """Send call ``seq``'s answer (unless the caller is gone: it retries on a new
        connection)."""
        self.out -= 1
        if self.transport.is_closing():
            return
        try:
            payload = pickle.dumps((seq, ok, value), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # noqa: BLE001 - an answer that does not pickle is the caller's error
            payload = pickle.dumps((seq, False, RuntimeError(f"{name}: answer not sent: {e}")))
        if len(payload) > self.server.largest_out:
            self.server.largest_out = len(payload)
        # no drain: a host waits for its answers, so what is buffered for it stays small
        self.transport.write(self.session.seal(payload))
