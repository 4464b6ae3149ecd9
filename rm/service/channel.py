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
  port the system picks, and serves only ``CALLS``.  A connection starts with a challenge:
  the server sends a random nonce, the client answers HMAC-SHA256(key, nonce), and a wrong
  answer closes the connection before anything is unpickled.  The key is made by the RM
  process and handed out only through a Ray call (``ResourceManager.channel``), so the
  channel is as closed as the Ray cluster is.  The server is an asyncio ``Protocol``: a
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
* **Client** (``Channel``).  Connects on first use, asking ``resolve`` (a Ray call to the
  RM) where to.  When the RM dies its connections close (when its machine dies, TCP
  keepalive gives up on them within about five seconds): every call out on them fails with
  ``ChannelBroken``, which callers treat as Ray's ``RayActorError`` (retry with the same
  request id, ``rm/service/client.py``), and the next call resolves the restarted RM's new
  address.  Nothing the protocol promises changes: what is journaled before it is answered,
  idempotent retries and fencing are the RM's, whichever way a call arrives.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import pickle
import socket
import struct

from rayrm.rm.service.calls import HOST_CALLS

#: the names of the calls the channel serves: the hosts' (rm/service/calls.py)
CALLS = frozenset(HOST_CALLS)
_HEADER = struct.Struct("!I")
_NONCE = 16
#: a silent stream is probed after this many seconds, then every second, and given up after 3
#: unanswered probes: the RM's machine dying sends no FIN, and a call out would wait for ever
KEEPALIVE_IDLE = 2
#: the largest frame either side accepts (a host registering 100,000 NMs is ~20 MB)
MAX_FRAME = 1 << 30


class ChannelBroken(ConnectionError):
    """The connection to the RM closed (it died or restarts) with this call out or unsent."""


def _frame(obj) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


async def _read(reader: asyncio.StreamReader):
    (n,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    if n > MAX_FRAME:
        raise ConnectionError(f"frame of {n} bytes")
    return pickle.loads(await reader.readexactly(n))


def _keepalive(writer: asyncio.StreamWriter) -> None:
    """TCP keepalive on the stream (KEEPALIVE_IDLE), where the system has it."""
    sock = writer.get_extra_info("socket")
    if sock is None:
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", KEEPALIVE_IDLE), ("TCP_KEEPINTVL", 1), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, option):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)


def _proof(key: bytes, nonce: bytes) -> bytes:
    return hmac.new(key, nonce, hashlib.sha256).digest()


class ChannelServer:
    """Serves ``CALLS`` on a TCP port (module docstring): each through ``target.serve(call,
    *args)``, a coroutine (the RM actor's)."""

    def __init__(self, target, key: bytes):
        self.target, self.key = target, key
        self.server: asyncio.base_events.Server | None = None
        self.address: tuple[str, int] | None = None
        self._starting: asyncio.Lock | None = None
        self._open: set[asyncio.Transport] = set()
        self._running: set[asyncio.Task] = set()    # held: the loop keeps only weak references
        self.calls = 0
        self.refused = 0                 # connections that failed the challenge
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
        return self.address

    def close(self) -> None:
        """Stop listening and close every connection (the callers' calls out fail)."""
        if self.server is not None:
            self.server.close()
        for transport in list(self._open):
            transport.close()

    def wire(self, name: str) -> bytes | None:
        """The pickled arguments of call ``name`` if it is the one starting now (module
        docstring), once: a second record in the same start (a tick the call ran) gets None."""
        wire, self._wire = self._wire, None
        return wire[1] if wire is not None and wire[0] == name else None

    def dispatch(self, transport: asyncio.Transport, seq: int, name: str, args: tuple, wire: bytes) -> None:
        """Start call ``seq`` as its frame is read, and answer it as soon as it is done.

        The RM's methods are coroutines that, but for a long poll, never wait: each is run
        here, in the callback that read its frame, up to its first wait (as Python 3.12's
        eager tasks do), so a call that does not wait costs no task and no turn of the
        loop.  One that waits goes on in a task (``_Rest``).  ``wire``: ``args`` pickled,
        offered to the call until its first wait."""
        self.calls += 1
        try:
            call = HOST_CALLS.get(name)
            if call is None:
                raise AttributeError(f"the RM's channel serves no call {name!r}")
            coro = self.target.serve(call, *args)
        except Exception as e:  # noqa: BLE001 - the caller raises it, as a Ray call would
            self._answer(transport, seq, name, False, e)
            return
        self._wire = (name, wire)
        try:
            waiting = coro.send(None)
        except StopIteration as done:
            self._answer(transport, seq, name, True, done.value)
        except Exception as e:  # noqa: BLE001
            self._answer(transport, seq, name, False, e)
        else:
            task = asyncio.get_running_loop().create_task(self._finish(transport, seq, name, _Rest(coro, waiting)))
            self._running.add(task)
            task.add_done_callback(self._running.discard)
        finally:
            self._wire = None

    async def _finish(self, transport: asyncio.Transport, seq: int, name: str, rest: "_Rest") -> None:
        try:
            value = await rest
        except Exception as e:  # noqa: BLE001
            self._answer(transport, seq, name, False, e)
        else:
            self._answer(transport, seq, name, True, value)

    @staticmethod
    def _answer(transport: asyncio.Transport, seq: int, name: str, ok: bool, value) -> None:
        if transport.is_closing():
            return                        # the caller is gone; it retries on a new connection
        try:
            frame = _frame((seq, ok, value))
        except Exception as e:  # noqa: BLE001 - an answer that does not pickle is the caller's error
            frame = _frame((seq, False, RuntimeError(f"{name}: answer not sent: {e}")))
        # no drain: a host waits for its answers, so what is buffered for it stays small
        transport.write(frame)


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
    """One host's connection on the server: the challenge, then frames, each call started
    in the callback that read it (``ChannelServer.dispatch``), so calls start in the
    order they were sent."""

    def __init__(self, server: ChannelServer):
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.nonce = os.urandom(_NONCE)
        self.proven = False
        self.buf = bytearray()

    def connection_made(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.server._open.add(transport)
        transport.write(self.nonce)

    def connection_lost(self, exc) -> None:
        self.server._open.discard(self.transport)

    def data_received(self, data: bytes) -> None:
        buf, transport = self.buf, self.transport
        buf += data
        if not self.proven:
            size = hashlib.sha256().digest_size
            if len(buf) < size:
                return
            if not hmac.compare_digest(bytes(buf[:size]), _proof(self.server.key, self.nonce)):
                self.server.refused += 1
                transport.close()
                return
            self.proven = True
            del buf[:size]
        while len(buf) >= _HEADER.size and not transport.is_closing():
            (n,) = _HEADER.unpack_from(buf)
            end = _HEADER.size + n
            if n > MAX_FRAME:
                transport.close()
                return
            if len(buf) < end:
                return
            try:
                seq, name, wire = pickle.loads(bytes(buf[_HEADER.size:end]))
                args = pickle.loads(wire)
            except Exception:  # noqa: BLE001 - a garbled stream ends; its caller reconnects
                transport.close()
                return
            del buf[:end]
            self.server.dispatch(transport, seq, name, args, wire)


class _Connection:
    """One open stream to the RM and the calls out on it."""

    __slots__ = ("writer", "pending")

    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer
        self.pending: dict[int, asyncio.Future] = {}

    def broken(self) -> None:
        """The stream ended: every call out on it fails with ChannelBroken."""
        self.writer.close()
        pending, self.pending = self.pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(ChannelBroken("the RM's connection closed"))


class Channel:
    """One host's connection to the RM (module docstring).  ``resolve``: an async function
    returning the RM's (host, port, key), or raising while the RM is down."""

    def __init__(self, resolve):
        self.resolve = resolve
        self._conn: _Connection | None = None
        self._seq = 0
        self._connecting: asyncio.Lock | None = None
        self._reading: asyncio.Task | None = None    # held: the loop keeps only weak references

    async def call(self, name: str, *args):
        """``name(*args)`` on the RM; raises what the RM's method raised, or ChannelBroken."""
        conn = await self._connect()
        self._seq += 1
        frame = _frame((self._seq, name, pickle.dumps(args, protocol=pickle.HIGHEST_PROTOCOL)))
        fut = asyncio.get_running_loop().create_future()
        conn.pending[self._seq] = fut
        try:
            conn.writer.write(frame)
        except (ConnectionError, OSError):
            conn.broken()
        ok, value = await fut
        if not ok:
            raise value
        return value

    def method(self, name: str) -> "ChannelMethod":
        return ChannelMethod(self, name)

    async def _connect(self) -> _Connection:
        conn = self._conn
        if conn is not None and not conn.writer.is_closing():
            return conn
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:            # one connection however many calls wait for it
            conn = self._conn
            if conn is not None and not conn.writer.is_closing():
                return conn
            host, port, key = await self.resolve()
            try:
                reader, writer = await asyncio.open_connection(host, port)
                _keepalive(writer)
                nonce = await reader.readexactly(_NONCE)
                writer.write(_proof(key, nonce))
            except (ConnectionError, OSError, asyncio.IncompleteReadError) as e:
                raise ChannelBroken(f"connecting to the RM at {host}:{port}: {e}") from None
            self._conn = conn = _Connection(writer)
            self._reading = asyncio.get_running_loop().create_task(self._answers(reader, conn))
            return conn

    @staticmethod
    async def _answers(reader: asyncio.StreamReader, conn: _Connection) -> None:
        """Hand each answer to its call; when the stream ends, fail the calls still out."""
        try:
            while True:
                seq, ok, value = await _read(reader)
                fut = conn.pending.pop(seq, None)
                if fut is not None and not fut.done():
                    fut.set_result((ok, value))
        except Exception:  # noqa: BLE001 - a stream that breaks or garbles ends: its calls fail
            pass
        finally:
            conn.broken()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.broken()
            self._conn = None


class ChannelMethod:
    """One RM call through a ``Channel``, awaited like a Ray actor method:
    ``await method.remote(*args)``."""

    __slots__ = ("channel", "name")

    def __init__(self, channel: Channel, name: str):
        self.channel, self.name = channel, name

    def remote(self, *args):
        return self.channel.call(self.name, *args)
