"""One connection of the RM's channel: the handshake both ends run, the MAC on every frame,
and the host's end of it (``Channel``); the RM's end is ``rm/service/channel.py``.

The handshake is a mutual challenge, as ``multiprocessing.connection``'s (``deliver_challenge``
and ``answer_challenge`` run both ways), on the channel's own asyncio stream::

    server -> client   Ns                                 16 random bytes
    client -> server   Nc, HMAC(K, "client" | Ns | Nc)    16 random bytes and the client's proof
    server -> client   HMAC(K, "server" | Ns | Nc)        the server's proof

K is the RM's channel key (handed out only through a Ray call).  The server unpickles nothing
before the client's proof checks; the client sends no call and unpickles nothing before the
server's does — a peer that reaches a fake server (a port taken over after the RM died) gets
no code run in its host.  Both nonces are fresh, so an old handshake replayed proves nothing.

After it, each direction has its own session key, HMAC(K, "client->server" | Ns | Nc) and
HMAC(K, "server->client" | Ns | Nc), and every frame is::

    [u32 length n][n bytes: the pickle][32 bytes: HMAC-SHA256(session key, u64 counter | pickle)]

with ``counter`` the frame's number in its direction, counted by both ends and never sent.
A frame injected into the stream, altered, cut, replayed from this session or another, or
reflected back to its sender fails its MAC, and the receiver closes the connection before
it unpickles the frame.  The frames are not encrypted: the calls carry the replay's
schedule, no secret (docs/security.md).

**The host's end** (``Channel``) connects on first use, asking ``resolve`` (a Ray call to
the RM) where to and with what key; it proves the key and checks the server's proof
before it sends a call or unpickles anything, and checks every answer's MAC before
unpickling it.  When the stream closes — the RM died or restarts, or an answer failed its
check — every call out on it fails with ``ChannelBroken``, and the next call connects
again.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import pickle
import socket
import struct

NONCE = 16
MAC = hashlib.sha256().digest_size
HEADER = struct.Struct("!I")
#: what the client sends after the server's nonce: its nonce and its proof
CLIENT_HELLO = NONCE + MAC
#: wall seconds either end gives the other to complete the handshake
HANDSHAKE_SECONDS = 5.0
#: a silent stream is probed after this many seconds, then every second, and given up after 3
#: unanswered probes: a machine dying sends no FIN, and a call out would wait for ever
KEEPALIVE_IDLE = 2
#: the largest frame either end accepts.  The largest legitimate frames measured: at paper
#: scale (1,000 NMs, 180,000 containers, ``rayrm replay`` at 0.02) 240,107 bytes to the RM and
#: 220,061 from it (summary.json ``channel``); a host registering the 10,000 NMs of
#: ``bench_rm_throughput.py --nodes 10000``, the largest cluster any benchmark runs, 640,346
#: bytes (64 an NM, ``tests/test_channel_guard.py``).  16 MiB is 26 times the largest, and
#: bounds what one authenticated peer can make the other end buffer.
MAX_FRAME = 16 * 2**20


def _hmac(key: bytes, data: bytes) -> bytes:
    return hmac.digest(key, data, "sha256")


def client_proof(key: bytes, server_nonce: bytes, client_nonce: bytes) -> bytes:
    return _hmac(key, b"client" + server_nonce + client_nonce)


def server_proof(key: bytes, server_nonce: bytes, client_nonce: bytes) -> bytes:
    return _hmac(key, b"server" + server_nonce + client_nonce)


def client_hello(key: bytes, server_nonce: bytes) -> tuple[bytes, bytes]:
    """(the client's nonce, what it sends: that nonce and its proof)."""
    nonce = os.urandom(NONCE)
    return nonce, nonce + client_proof(key, server_nonce, nonce)


def proven(expected: bytes, given: bytes) -> bool:
    return hmac.compare_digest(expected, given)


class Session:
    """The MACs of one connection's frames, as seen from one end (``server`` or not)."""

    __slots__ = ("send_key", "recv_key", "sent", "received")

    def __init__(self, key: bytes, server_nonce: bytes, client_nonce: bytes, server: bool):
        nonces = server_nonce + client_nonce
        up, down = _hmac(key, b"client->server" + nonces), _hmac(key, b"server->client" + nonces)
        self.send_key, self.recv_key = (down, up) if server else (up, down)
        self.sent = self.received = 0

    def seal(self, payload: bytes) -> bytes:
        """``payload`` framed: its length, itself, its MAC under the next sending counter."""
        mac = _hmac(self.send_key, self.sent.to_bytes(8, "big") + payload)
        self.sent += 1
        return HEADER.pack(len(payload)) + payload + mac

    def check(self, payload: bytes, mac: bytes) -> bool:
        """Whether ``mac`` is the next received frame's MAC of ``payload`` (then counted)."""
        if not hmac.compare_digest(mac, _hmac(self.recv_key, self.received.to_bytes(8, "big") + payload)):
            return False
        self.received += 1
        return True


class ChannelBroken(ConnectionError):
    """The connection to the RM closed (it died or restarts) with this call out or unsent."""


def keepalive(transport) -> None:
    """TCP keepalive on a stream (KEEPALIVE_IDLE), where the system has it; ``transport``:
    an asyncio transport or stream writer."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", KEEPALIVE_IDLE), ("TCP_KEEPINTVL", 1), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, option):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)


class _Connection:
    """One open stream to the RM, its session and the calls out on it."""

    __slots__ = ("writer", "session", "pending")

    def __init__(self, writer: asyncio.StreamWriter, session: Session):
        self.writer, self.session = writer, session
        self.pending: dict[int, asyncio.Future] = {}

    def broken(self) -> None:
        """The stream ended: every call out on it fails with ChannelBroken."""
        self.writer.close()
        pending, self.pending = self.pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(ChannelBroken("the RM's connection closed"))


async def _handshake(host: str, port: int, key: bytes):
    """(reader, writer, session) of a new connection whose server proved ``key``."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        keepalive(writer)
        server_nonce = await reader.readexactly(NONCE)
        nonce, hello = client_hello(key, server_nonce)
        writer.write(hello)
        if not proven(server_proof(key, server_nonce, nonce), await reader.readexactly(MAC)):
            raise ConnectionError("the server did not prove the RM's key")
    except BaseException:
        writer.close()
        raise
    return reader, writer, Session(key, server_nonce, nonce, server=False)


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
        payload = pickle.dumps((self._seq, name, pickle.dumps(args, protocol=pickle.HIGHEST_PROTOCOL)),
                               protocol=pickle.HIGHEST_PROTOCOL)
        fut = asyncio.get_running_loop().create_future()
        conn.pending[self._seq] = fut
        try:
            conn.writer.write(conn.session.seal(payload))
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
                reader, writer, session = await asyncio.wait_for(_handshake(host, port, key), HANDSHAKE_SECONDS)
            except (ConnectionError, OSError, asyncio.IncompleteReadError, asyncio.TimeoutError) as e:
                raise ChannelBroken(f"connecting to the RM at {host}:{port}: {e or type(e).__name__}") from None
            self._conn = conn = _Connection(writer, session)
            self._reading = asyncio.get_running_loop().create_task(self._answers(reader, conn))
            return conn

    @staticmethod
    async def _answers(reader: asyncio.StreamReader, conn: _Connection) -> None:
        """Hand each answer to its call once its MAC checks; when the stream ends or an
        answer fails its check, fail the calls still out."""
        try:
            while True:
                (n,) = HEADER.unpack(await reader.readexactly(HEADER.size))
                if n > MAX_FRAME:
                    return
                data = await reader.readexactly(n + MAC)
                payload = data[:n]
                if not conn.session.check(payload, data[n:]):
                    return
                seq, ok, value = pickle.loads(payload)
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
