"""The web UI against a hostile client (docs/security.md, "The web UI"): a real server on
loopback serving a finished simulation, and clients speaking HTTP by hand."""

from __future__ import annotations

import http.client
import socket
import time

import pytest

from rayrm.rm.sim.engine import simulate
from rayrm.rm.ui.rundir import RunDirSource
from rayrm.rm.ui.server import MAX_CONNECTIONS, serve

from samples import small_config


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    simulate(small_config(), out=out, progress=False)
    server = serve(RunDirSource(out), port=0)
    yield server
    server.close()


def status_for_host(server, host: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    conn.putrequest("GET", "/ws/v1/cluster/info", skip_host=True)
    conn.putheader("Host", host)
    conn.endheaders()
    answer = conn.getresponse()
    answer.read()
    conn.close()
    status = answer.status
    return status


def test_a_loopback_ui_answers_only_for_its_own_host_names(server):
    port = server.server_address[1]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", f"[::1]:{port}"):
        assert status_for_host(server, host) == 200, host
    # a page at attacker.example whose name now resolves to 127.0.0.1 sends its own Host
    for host in (f"attacker.example:{port}", "attacker.example", f"127.0.0.1:{port + 1}", "localhost"):
        assert status_for_host(server, host) == 421, host


def exchange(server, raw: bytes) -> bytes:
    """Send ``raw`` on one connection and read until the server closes it."""
    with socket.create_connection(server.server_address[:2], timeout=10) as s:
        s.sendall(raw)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    return got


@pytest.mark.parametrize("method", ["POST", "GET"])
def test_a_request_s_body_is_never_read_as_a_request_of_its_own(server, method):
    port = server.server_address[1]
    smuggled = f"GET /ws/v1/cluster/info HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    request = (f"{method} /ws/v1/cluster/metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
               f"Content-Length: {len(smuggled)}\r\n\r\n").encode() + smuggled
    answer = exchange(server, request)
    # one answer (405 to the POST, 200 to the GET), then the connection closes: the body,
    # a whole GET of /info, got no answer of its own
    assert answer.count(b"HTTP/1.1 ") == 1
    assert answer.startswith(b"HTTP/1.1 405" if method == "POST" else b"HTTP/1.1 200")
    assert b"Connection: close" in answer and b"clusterInfo" not in answer


def test_idle_connections_make_room_for_an_authorised_request(server):
    host, port = server.server_address[:2]
    idle = [socket.create_connection((host, port), timeout=10) for _ in range(MAX_CONNECTIONS - 4)]
    slow = [socket.create_connection((host, port), timeout=10) for _ in range(4)]
    for s in slow:                                   # a request line sent, its headers never
        s.sendall(b"GET /ws/v1/cluster/info HTTP/1.1\r\nHost: 127.0.0.1")
    try:
        assert wait_for(lambda: len(server._open) == MAX_CONNECTIONS)
        # every connection is held and none serves a request: the newest closes the oldest
        for _ in range(3):
            conn = http.client.HTTPConnection(host, port, timeout=10)
            conn.request("GET", "/ws/v1/cluster/info")
            assert conn.getresponse().status == 200
            conn.close()
        assert idle[0].recv(1) == b""                   # the oldest made room; the probes then fit
    finally:
        for s in idle + slow:
            s.close()


def wait_for(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
