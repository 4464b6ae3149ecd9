"""One channel connection's security: both ends prove the key, then every frame carries a MAC.

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
"""

from __future__ import annotations

import hashlib
import hmac
import os
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
