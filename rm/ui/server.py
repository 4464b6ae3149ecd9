"""The HTTP server: the page at ``/``, YARN's API at ``/ws/v1/cluster``, rayrm's at ``/ws/v1/rayrm``.

A stdlib ``ThreadingHTTPServer`` in the driver (or ``rayrm ui``) process.  A request
reads the source's current ``ClusterView`` — an immutable object the live source swaps
at most once per poll — so no request ever reaches the RM actor.  Safe by default:

* loopback unless told otherwise, and then only for requests whose ``Host`` names this
  server (``localhost``, ``127.0.0.1``, ``[::1]`` and its port; else 421): a web page
  whose name an attacker re-points at 127.0.0.1 (DNS rebinding) cannot read it;
* bound elsewhere it needs the cluster's token (``auth``): ``Authorization: Bearer
  <token>``, or a session cookie a browser gets by opening ``/?token=<token>`` once — a
  random value of this server's, never the token itself, so that whoever sees the cookie
  (it travels over plain HTTP) can read the UI but not run code on the cluster;
* GET and HEAD only (anything else: 405); a request that carries a body is answered and
  its connection closed, so the body is never read as a request of its own; no CORS
  headers, so other origins cannot read it;
* at most ``MAX_CONNECTIONS`` connections at once: past that, the oldest one not in the
  middle of an authorised request (idle, or still sending its request) is closed to make
  room, so idle connections cannot lock an authorised user out; only when every
  connection is serving a request does the next get 503.  A socket timeout for slow
  clients, URLs up to ``MAX_URL`` characters, responses up to ``MAX_BODY`` bytes (apps
  and nodes are paged), each encoded response cached per view version.
"""

from __future__ import annotations

import errno
import hmac
import json
import re
import secrets
import socket
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import parse_qsl, urlsplit

from rayrm.rm.ui import extras, yarn
from rayrm.rm.ui.auth import is_loopback
from rayrm.rm.ui.yarn import ApiError

MAX_CONNECTIONS = 32
MAX_URL = 2048
MAX_BODY = 16 * 2 ** 20
SOCKET_TIMEOUT = 15.0
#: longest wait for a newer view (``after=``), seconds
MAX_WAIT = 10.0
#: ports tried after the one asked for, when it is taken
PORT_TRIES = 20
COOKIE = "rayrm_session"



@dataclass(frozen=True)
class UISettings:
    """Where to serve: ``host``, ``port`` (the next free one if taken; 0: the system picks)
    and the token a request must carry (None on loopback)."""

    host: str = "127.0.0.1"
    port: int = 8088
    token: str | None = None


_ROUTES = [
    (re.compile(r"^/ws/v1/cluster/?$"), lambda v, p, m, e: (yarn.cluster_info(v), {})),
    (re.compile(r"^/ws/v1/cluster/info/?$"), lambda v, p, m, e: (yarn.cluster_info(v), {})),
    (re.compile(r"^/ws/v1/cluster/metrics/?$"), lambda v, p, m, e: (yarn.metrics(v), {})),
    (re.compile(r"^/ws/v1/cluster/scheduler/?$"), lambda v, p, m, e: (yarn.scheduler(v), {})),
    (re.compile(r"^/ws/v1/cluster/apps/?$"), lambda v, p, m, e: yarn.apps(v, p)),
    (re.compile(r"^/ws/v1/cluster/apps/([^/]+)/?$"), lambda v, p, m, e: (yarn.app(v, m[0]), {})),
    (re.compile(r"^/ws/v1/cluster/apps/([^/]+)/appattempts/?$"),
     lambda v, p, m, e: (yarn.app_attempts(v, m[0]), {})),
    (re.compile(r"^/ws/v1/cluster/nodes/?$"), lambda v, p, m, e: yarn.nodes(v, p)),
    (re.compile(r"^/ws/v1/cluster/nodes/([^/]+)/?$"), lambda v, p, m, e: (yarn.node(v, m[0]), {})),
    (re.compile(r"^/ws/v1/rayrm/overview/?$"), lambda v, p, m, e: (extras.overview(v, e), {})),
    (re.compile(r"^/ws/v1/rayrm/history/?$"), lambda v, p, m, e: (extras.history(v), {})),
    (re.compile(r"^/ws/v1/rayrm/shares/?$"), lambda v, p, m, e: (extras.shares(v, p), {})),
    (re.compile(r"^/ws/v1/rayrm/apps/?$"), lambda v, p, m, e: (extras.apps(v, p), {})),
    (re.compile(r"^/ws/v1/rayrm/nodes/?$"), lambda v, p, m, e: (extras.nodes(v, p), {})),
    (re.compile(r"^/ws/v1/rayrm/pending/?$"), lambda v, p, m, e: (extras.pending(v, p), {})),
]

_STATIC = {"/": ("index.html", "text/html; charset=utf-8"),
           "/cluster": ("index.html", "text/html; charset=utf-8"),       # YARN's UI path (clients probe it)
           "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
           "/static/style.css": ("style.css", "text/css; charset=utf-8")}


def _assets() -> dict[str, bytes]:
    root = resources.files("rayrm.rm.ui") / "static"
    return {name: (root / name).read_bytes() for name, _ in set(_STATIC.values())}


class _Handler(BaseHTTPRequestHandler):
    server: "UIServer"
    protocol_version = "HTTP/1.1"
    timeout = SOCKET_TIMEOUT
    server_version = "rayrm"
    sys_version = ""

    def log_message(self, format, *args):  # noqa: A002 - the stdlib's name
        pass

    def do_GET(self):
        self._answer(head=False)

    def do_HEAD(self):
        self._answer(head=True)

    def _refuse_method(self):
        self.close_connection = True          # its body, unread, must not become a request
        self._send(405, _json(ApiError(405, f"HTTP 405 Method Not Allowed: {self.command}").body()),
                   "application/json", {"Allow": "GET, HEAD"}, head=False)

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = _refuse_method

    def _answer(self, head: bool) -> None:
        if self.headers.get("Content-Length", "0").strip() not in ("", "0") or "Transfer-Encoding" in self.headers:
            self.close_connection = True      # a GET with a body: answered, the body never read
        if len(self.path) > MAX_URL:
            self._send(414, _json(ApiError(400, "URL too long").body()), "application/json", head=head)
            return
        host = self.headers.get("Host")
        if self.server.hosts is not None and host is not None and host.lower() not in self.server.hosts:
            self.close_connection = True
            self._send(421, _json(ApiError(421, f"this server does not answer for Host {host[:100]!r}").body()),
                       "application/json", head=head)
            return
        url = urlsplit(self.path)
        params = dict(parse_qsl(url.query, keep_blank_values=True))
        if not self._authorised(url.path, params, head):
            return
        self.server.serving(self.request, True)
        try:
            self._serve(url, params, head)
        finally:
            self.server.serving(self.request, False)

    def _serve(self, url, params: dict, head: bool) -> None:
        if url.path in _STATIC:
            name, kind = _STATIC[url.path]
            self._send(200, self.server.assets[name], kind, head=head)
            return
        try:
            body, headers = self.server.respond(url.path, url.query, params)
        except ApiError as e:
            self._send(e.status, _json(e.body()), "application/json", head=head)
            return
        except Exception as e:  # noqa: BLE001 - a bug answers 500, it does not kill the connection's thread
            self._send(500, _json(ApiError(500, f"{type(e).__name__}: {e}").body()), "application/json", head=head)
            return
        self._send(200, body, "application/json", headers, head=head)

    def _authorised(self, path: str, params: dict, head: bool) -> bool:
        token = self.server.token
        if token is None:
            return True
        given = self.headers.get("Authorization", "")
        given = given[7:].strip() if given.startswith("Bearer ") else ""
        cookie = re.search(rf"(?:^|;\s*){COOKIE}=([^;]+)", self.headers.get("Cookie", ""))
        if path == "/" and "token" in params and hmac.compare_digest(params["token"].encode(), token.encode()):
            self._send(303, b"", "text/plain", {"Location": "/", "Set-Cookie":
                       f"{COOKIE}={self.server.session}; HttpOnly; SameSite=Strict; Path=/"}, head=head)
            return False
        for candidate, expected in ((given, token), (cookie.group(1) if cookie else "", self.server.session)):
            if candidate and hmac.compare_digest(candidate.encode(), expected.encode()):
                return True
        self._send(401, _json(ApiError(401, "the cluster's auth token is required "
                                            "(Authorization: Bearer <token>)").body()),
                   "application/json", {"WWW-Authenticate": "Bearer"}, head=head)
        return False

    def _send(self, status: int, body: bytes, kind: str, headers: dict | None = None, head: bool = False) -> None:
        self.send_response(status)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)


def _own_hosts(host: str, port: int) -> frozenset[str]:
    """The ``Host`` values a loopback server answers: its loopback names with its port (and
    without, on port 80)."""
    names = {"localhost", "127.0.0.1", "[::1]", f"[{host}]" if ":" in host else host}
    return frozenset({f"{n}:{port}" for n in names} | (names if port == 80 else set()))


def _json(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


class UIServer(ThreadingHTTPServer):
    """Serves one source (``LiveSource`` or ``RunDirSource``); see the module docstring."""

    daemon_threads = True
    request_queue_size = MAX_CONNECTIONS

    def __init__(self, source, host: str, port: int, token: str | None = None):
        self.source, self.token = source, token
        self.session = secrets.token_urlsafe(32)     # the cookie's value (module docstring)
        self.assets = _assets()
        self._open: dict[socket.socket, bool] = {}   # open connections, oldest first -> serving now
        self._open_lock = threading.Lock()
        self._cache: dict[tuple, tuple[bytes, dict]] = {}
        self._cache_version = -1
        self._cache_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, port), _Handler)
        self.hosts = _own_hosts(host, self.server_address[1]) if is_loopback(host) else None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{'[' + host + ']' if ':' in host else host}:{port}/"

    def respond(self, path: str, query: str, params: dict) -> tuple[bytes, dict]:
        """The encoded answer to a GET of ``path`` (raises ``ApiError``), cached per view version.
        ``after=V`` (any path) first waits up to ``wait`` seconds (at most ``MAX_WAIT``) for a
        view newer than version V: a client can wait for the next snapshot instead of polling."""
        if "after" in params:
            after, wait = params["after"], params.get("wait", str(MAX_WAIT))
            try:
                seconds = float(wait)
                if not seconds >= 0:
                    raise ValueError(wait)
                view = self.source.wait(int(after), min(seconds, MAX_WAIT))
            except ValueError:
                raise ApiError(400, f"after must be a version number and wait seconds, got {after[:20]!r}, "
                                    f"{wait[:20]!r}") from None
        else:
            view = self.source.view()
        key = (path, query)
        with self._cache_lock:
            if self._cache_version != view.version:
                self._cache.clear()
                self._cache_version = view.version
            hit = self._cache.get(key)
        if hit is not None:
            return hit
        for pattern, build in _ROUTES:
            m = pattern.match(path)
            if m:
                obj, headers = build(view, params, m.groups(), getattr(self.source, "error", ""))
                body = _json(obj)
                if len(body) > MAX_BODY:
                    raise ApiError(400, "the response is too large; ask for fewer items (limit, offset)")
                with self._cache_lock:
                    if len(self._cache) < 256 and self._cache_version == view.version:
                        self._cache[key] = (body, headers)
                return body, headers
        raise ApiError(404, f"no resource at {path[:200]}")

    def process_request(self, request, client_address):
        with self._open_lock:
            idle = None
            if len(self._open) >= MAX_CONNECTIONS:
                idle = next((conn for conn, serving in self._open.items() if not serving), None)
                if idle is not None:
                    del self._open[idle]
            full = len(self._open) >= MAX_CONNECTIONS
            if not full:
                self._open[request] = False
        if idle is not None:
            try:
                idle.shutdown(socket.SHUT_RDWR)    # its thread reads EOF and ends
            except OSError:
                pass
        if full:
            try:
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            finally:
                self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._open_lock:
                self._open.pop(request, None)

    def handle_error(self, request, client_address):
        """A client that hung up mid-answer is no error of the server's; anything else is
        reported as the stdlib does."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def busy(self) -> int:
        """Connections serving an authorised request now."""
        with self._open_lock:
            return sum(self._open.values())

    def serving(self, request, now: bool) -> None:
        """Connection ``request`` is (or no longer is) serving an authorised request."""
        with self._open_lock:
            if request in self._open:
                self._open[request] = now

    def start(self) -> "UIServer":
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="rayrm-ui-http", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        self.source.close()


def serve(source, host: str = "127.0.0.1", port: int = 8088, token: str | None = None) -> UIServer:
    """A started ``UIServer`` on ``host``:``port``, or the next free port of ``PORT_TRIES``
    (port 0: one the system picks)."""
    last: OSError | None = None
    for p in ([0] if port == 0 else range(port, port + PORT_TRIES)):
        try:
            return UIServer(source, host, p, token).start()
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
            last = e
    raise OSError(errno.EADDRINUSE, f"ports {port}-{port + PORT_TRIES - 1} on {host} are all taken") from last
