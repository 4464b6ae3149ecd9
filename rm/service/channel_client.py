"""A host's end of the RM's channel (``rm/service/channel.py``): one connection, calls out on it.

Connects on first use, asking ``resolve`` (a Ray call to the RM) where to and with what
key; proves the key and checks the server's proof before it sends a call or unpickles
anything (``rm/service/session.py``), and checks every answer's MAC before unpickling it.
When the stream closes — the RM died or restarts, or an answer failed its check — every
call out on it fails with ``ChannelBroken``, and the next call connects again.
"""

from __future__ import annotations

import asyncio
import pickle

from rayrm.rm.service.session import (HANDSHAKE_SECONDS, HEADER, MAC, MAX_FRAME, NONCE, ChannelBroken,
                                      Session, client_hello, keepalive, proven, server_proof)


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
