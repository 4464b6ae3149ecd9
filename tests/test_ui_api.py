"""YARN's REST API and rayrm's views over a run directory and over RM snapshots (no Ray).

The instance (``TINY``): nodes a <2 cpu, 2048 MB>, b <1 cpu, 1024 MB, disk=ssd>, c <1 cpu,
1024 MB> (c leaves at t = 2); job j, 4 tasks of <1 cpu, 512 MB> on a or c; job k, 1 task
of <1 cpu, 1024 MB> needing ssd; all 10 s.  kill-nm:b@1 with nm_expiry 2: b is LOST at
t = 3 (restarting at 5).  Simulated until t = 4.5:

* t = 0: j runs 2 on a and 1 on c, k runs 1 on b;
* t = 2: c leaves (DECOMMISSIONED), j's task there is lost: j has 2 running, 2 pending;
* t = 3: b is LOST, k's task is lost: k has 0 running, 1 pending, and no live node with ssd.

So at the end: live capacity is a's, 2 vcores and 2048 MB, all of it (2 containers of
<1, 512>) in use by 2 cores and 1024 MB; 3 tasks pending; 4 attempts ever allocated.
"""

from __future__ import annotations

import http.client
import json
import time

import pytest

from rayrm.rm.cli.main import main
from rayrm.rm.core.config import parse_config
from rayrm.rm.core.errors import InputError
from rayrm.rm.sim.engine import simulate
from rayrm.rm.ui.auth import token_for
from rayrm.rm.ui.live import LiveSource
from rayrm.rm.ui.rundir import RunDirSource
from rayrm.rm.ui.server import serve

yarn_api_client = pytest.importorskip("yarn_api_client")

TINY = {"name": "tiny",
        "cluster": {"nodes": [{"name": "a", "capacity": {"cpu": 2, "memory_mb": 2048}},
                              {"name": "b", "capacity": {"cpu": 1, "memory_mb": 1024}, "attributes": {"disk": "ssd"}},
                              {"name": "c", "capacity": {"cpu": 1, "memory_mb": 1024}}],
                    "events": [{"time": 2, "leave": "c"}]},
        "workload": {"jobs": [
            {"id": "j", "submit": 0, "tasks": 4, "demand": {"cpu": 1, "memory_mb": 512}, "duration": 10,
             "constraint": "node in (a, c)"},
            {"id": "k", "submit": 0, "tasks": 1, "demand": {"cpu": 1, "memory_mb": 1024}, "duration": 10,
             "constraint": "disk == ssd"}]},
        "faults": ["kill-nm:b@1"],
        "run": {"seed": 1, "nm_expiry": 2}}


@pytest.fixture(scope="module")
def partial_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny")
    simulate(parse_config(TINY), out=out, progress=False, until=4.5)
    server = serve(RunDirSource(out), port=0)
    yield out, server.url
    server.close()


def client(url):
    from yarn_api_client.resource_manager import ResourceManager
    return ResourceManager(service_endpoints=[url.rstrip("/")])


def get(url: str, path: str, method: str = "GET", headers: dict | None = None):
    host, port = url[len("http://"):].rstrip("/").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request(method, path, headers=headers or {})
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, dict(r.getheaders()), body


def test_metrics_of_a_partial_simulation_read_by_a_yarn_client(partial_run):
    _, url = partial_run
    m = client(url).cluster_metrics().data["clusterMetrics"]
    # live: a only (2 vcores, 2048 MB), its 2 containers <1, 512> use 2 vcores and 1024 MB
    assert (m["totalVirtualCores"], m["totalMB"]) == (2, 2048)
    assert (m["allocatedVirtualCores"], m["allocatedMB"], m["availableVirtualCores"], m["availableMB"]) == \
        (2, 1024, 0, 1024)
    # j: 2 pending (one never started, one lost with c); k: 1 (lost with b)
    assert (m["containersAllocated"], m["containersPending"], m["containersAllocatedTotal"]) == (2, 3, 4)
    assert (m["activeNodes"], m["lostNodes"], m["decommissionedNodes"], m["totalNodes"]) == (1, 1, 1, 3)
    # both jobs were cut short by --until: YARN's KILLED
    assert (m["appsSubmitted"], m["appsKilled"], m["appsRunning"]) == (2, 2, 0)
    memory = next(r for r in m["totalClusterResourcesAcrossPartition"]["resourceInformations"]["resourceInformation"]
                  if r["name"] == "memory-mb")
    assert (memory["value"], memory["units"]) == (2048, "Mi")


def test_apps_nodes_and_scheduler_of_a_partial_simulation(partial_run):
    _, url = partial_run
    rm = client(url)
    apps = {a["id"]: a for a in rm.cluster_applications().data["apps"]["app"]}
    j, k = apps["j"], apps["k"]
    assert (j["state"], j["finalStatus"], j["runningContainers"], j["allocatedMB"], j["allocatedVCores"]) == \
        ("KILLED", "KILLED", 2, 1024, 2)
    assert (j["tasksRunning"], j["tasksPending"], j["tasksFinished"], k["tasksPending"]) == (2, 2, 0, 1)
    assert rm.cluster_application("k").data["app"]["allocatedMB"] == 0
    assert [x["id"] for x in rm.cluster_application_attempts("j").data["appAttempts"]["appAttempt"]] == [1]
    nodes = {n["id"]: n for n in rm.cluster_nodes().data["nodes"]["node"]}
    assert {n: x["state"] for n, x in nodes.items()} == {"a": "RUNNING", "b": "LOST", "c": "DECOMMISSIONED"}
    assert (nodes["a"]["numContainers"], nodes["a"]["usedMemoryMB"], nodes["a"]["availMemoryMB"]) == (2, 1024, 1024)
    assert nodes["b"]["healthReport"] == "no heartbeat for 2 trace s"
    # the client checks node states as if they were app states, so filter through its plain request
    lost = rm.request("/ws/v1/cluster/nodes", params={"states": "LOST"}).data["nodes"]["node"]
    assert [n["id"] for n in lost] == ["b"]
    root = rm.cluster_scheduler().data["scheduler"]["schedulerInfo"]["rootQueue"]
    leaf = root["childQueues"]["queue"][0]
    assert (root["schedulingPolicy"], leaf["queueName"], root["usedResources"]["memory"]) == ("tsf", "root.default", 1024)
    # an interrupted run's apps are no longer active: the leaf lists none
    assert leaf["apps"]["app"] == []


def test_why_the_pending_apps_wait(partial_run):
    _, url = partial_run
    status, _, body = get(url, "/ws/v1/rayrm/pending")
    reasons = {a["id"]: a["reason"] for a in json.loads(body)["apps"]}
    # k needs ssd and b, the only ssd node, is lost; j's one live node (a) is full
    assert status == 200 and reasons["k"] == "no live node it may use can hold one of its tasks"
    assert reasons["j"].startswith("every node it may use (1) is full")


@pytest.mark.parametrize("path, status, exception", [
    ("/ws/v1/cluster/apps/nope", 404, "NotFoundException"),
    ("/ws/v1/cluster/apps/nope/appattempts", 404, "NotFoundException"),
    ("/ws/v1/cluster/nodes/nope", 404, "NotFoundException"),
    ("/ws/v1/cluster/apps?states=RUNING", 400, "BadRequestException"),
    ("/ws/v1/cluster/apps?limit=0", 400, "BadRequestException"),
    ("/ws/v1/cluster/apps?limit=ten", 400, "BadRequestException"),
    ("/ws/v1/cluster/apps?startedTimeBegin=10&startedTimeEnd=5", 400, "BadRequestException"),
    ("/ws/v1/cluster/nodes?states=GONE", 400, "BadRequestException"),
    ("/ws/v1/rayrm/overview?after=1&wait=nan", 400, "BadRequestException"),
])
def test_bad_requests_get_yarns_json_errors(partial_run, path, status, exception):
    got, headers, body = get(partial_run[1], path)
    assert got == status and headers["Content-Type"] == "application/json"
    assert json.loads(body)["RemoteException"]["exception"] == exception


def test_read_only_no_cors_paged_and_head(partial_run):
    url = partial_run[1]
    status, headers, _ = get(url, "/ws/v1/cluster/apps", method="POST")
    assert (status, headers["Allow"]) == (405, "GET, HEAD")
    status, headers, body = get(url, "/ws/v1/cluster/apps?limit=1", headers={"Origin": "http://evil.example"})
    assert status == 200 and "Access-Control-Allow-Origin" not in headers
    # two apps, one per page: the next page starts at 1
    assert (headers["X-Total-Count"], headers["X-Next-Offset"]) == ("2", "1")
    assert [a["id"] for a in json.loads(body)["apps"]["app"]] == ["j"]
    _, _, body = get(url, "/ws/v1/cluster/apps?limit=1&offset=1")
    assert [a["id"] for a in json.loads(body)["apps"]["app"]] == ["k"]
    # YARN's other filters: every app is user rayrm's, in root.default
    assert json.loads(get(url, "/ws/v1/cluster/apps?user=bob")[2]) == {"apps": None}
    assert len(json.loads(get(url, "/ws/v1/cluster/apps?queue=root.default&user=rayrm")[2])["apps"]["app"]) == 2
    status, headers, body = get(url, "/ws/v1/cluster/metrics", method="HEAD")
    assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0
    status, _, body = get(url, "/")
    assert status == 200 and b"/static/app.js" in body


def test_a_token_guards_a_server_that_needs_one(partial_run, monkeypatch):
    server = serve(RunDirSource(partial_run[0]), port=0, token="s3cret")
    try:
        assert get(server.url, "/ws/v1/cluster/metrics")[0] == 401
        assert get(server.url, "/ws/v1/cluster/metrics", headers={"Authorization": "Bearer wrong"})[0] == 401
        assert get(server.url, "/ws/v1/cluster/metrics", headers={"Authorization": "Bearer s3cret"})[0] == 200
        status, headers, _ = get(server.url, "/?token=s3cret")
        # the cookie holds the server's own random session value, never the cluster's token
        session = server.session
        assert status == 303 and headers["Set-Cookie"] == f"rayrm_session={session}; HttpOnly; SameSite=Strict; Path=/"
        assert len(session) >= 43 and "s3cret" not in headers["Set-Cookie"]
        assert get(server.url, "/ws/v1/cluster/metrics", headers={"Cookie": f"rayrm_session={session}"})[0] == 200
        assert get(server.url, "/ws/v1/cluster/metrics", headers={"Cookie": "rayrm_session=s3cret"})[0] == 401
    finally:
        server.close()
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(partial_run[0] / "no-such-token"))
    monkeypatch.setenv("HOME", str(partial_run[0]))
    assert token_for("127.0.0.1") is None
    with pytest.raises(InputError, match="needs the cluster's auth token"):
        token_for("0.0.0.0")
    monkeypatch.setenv("RAY_AUTH_TOKEN", "abc")
    assert token_for("0.0.0.0") == "abc"


def test_cli_errors_are_one_line(tmp_path, capsys, monkeypatch):
    assert main(["ui", str(tmp_path / "missing")]) == 2
    assert main(["ui", str(tmp_path)]) == 2          # a directory, but no run in it
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "none"))
    monkeypatch.setenv("HOME", str(tmp_path))
    # refused before Ray starts: bound beyond loopback without a token
    assert main(["replay", "--ui-host", "0.0.0.0"]) == 2
    assert main(["replay", "--ui-port", "70000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith(("rayrm ui: error", "rayrm replay: error")) for line in err)


def test_live_snapshots_become_yarns_node_states_and_totals():
    cfg = parse_config(TINY)
    start = 1000.0
    # at t = 5 (wall 1005 at scale 1): a alive with one <1, 512> container; b silent since
    # 1003 and not alive (LOST: no leave event); c not alive after its leave at 2
    snap = {"time": 5.0, "wall": 1005.0, "start_wall": start, "allocations": 6, "finished": 0, "epoch": 0,
            "lag": 0.01, "behind": False, "ticks": 40, "ticks_behind": 3,
            "nodes": [("a", True, (1.0, 1536.0), 1, 1004.5), ("b", False, (1.0, 1024.0), 0, 1003.0),
                      ("c", False, (1.0, 1024.0), 0, 1001.0)],
            "apps": [("j", "running", 0.0, 0.0, None, "", 1, 0, 1, 3, 0.5, 0.5, 1),
                     ("k", "running", 0.0, None, None, "", 2, 0, 0, 1, 0.0, 0.0, 0)]}
    source = LiveSource(cfg, "tsf", 1.0, fetch=lambda: None)
    view = source.update(snap)
    assert {n.name: n.state for n in view.nodes} == {"a": "RUNNING", "b": "LOST", "c": "DECOMMISSIONED"}
    from rayrm.rm.ui import yarn
    m = yarn.metrics(view)["clusterMetrics"]
    assert (m["allocatedMB"], m["allocatedVirtualCores"], m["availableMB"], m["containersPending"]) == (512, 1, 1536, 4)
    # k: ACCEPTED (no task started yet), its second attempt seen at t = 5
    apps = {a.app: a for a in view.apps}
    assert (apps["k"].status, apps["k"].attempts, apps["k"].attempt_starts) == ("waiting", 2, (5.0,))
    assert (m["appsPending"], m["appsRunning"]) == (1, 1)
    assert view.history.running == (1,) and view.history.used == ((0.5, 0.25),)
    assert source.wait(0, 0.0).version == 1
    # 3 of 40 ticks more than one interval behind: 7.5%, over the 5% a replay may be behind
    assert (view.pace["behind_fraction"], view.pace["kept_pace"]) == (0.075, False)


def test_rayrm_ui_serves_a_finished_simulation(tmp_path):
    """``rayrm ui`` as a user runs it, over TINY simulated to the end: j's task lost with c
    reruns on a at 10 with j's fourth task, k's lost with b reruns on b once it is back (5):
    7 attempts, both jobs FINISHED; a and b RUNNING, c DECOMMISSIONED (live: a and b,
    3 vcores, 3072 MB)."""
    import subprocess
    import sys

    simulate(parse_config(TINY), out=tmp_path, progress=False)
    proc = subprocess.Popen([sys.executable, "-m", "rayrm.rm.cli.main", "ui", str(tmp_path), "--ui-port", "0"],
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()                 # the command announces its URL, then serves
        url = line.split(" at ")[1].split()[0]
        m = client(url).cluster_metrics().data["clusterMetrics"]
        assert (m["appsCompleted"], m["appsKilled"], m["containersAllocatedTotal"]) == (2, 0, 7)
        assert (m["activeNodes"], m["decommissionedNodes"], m["totalVirtualCores"], m["totalMB"]) == (2, 1, 3, 3072)
        assert (m["containersAllocated"], m["allocatedMB"]) == (0, 0)
        k = client(url).cluster_application("k").data["app"]
        assert (k["state"], k["finalStatus"], k["finishedTraceTime"]) == ("FINISHED", "SUCCEEDED", 15.0)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_clients_that_hold_every_connection_busy_get_the_next_one_refused_not_stalled(partial_run):
    """MAX_CONNECTIONS clients each waiting on a long poll (``after=``, held until the test
    ends) hold every connection busy; the next request is answered 503 at once instead of
    waiting behind them.  (Idle connections are closed to make room instead:
    tests/test_ui_guard.py.)"""
    import socket
    import threading

    from rayrm.rm.ui.server import MAX_CONNECTIONS

    class Held(RunDirSource):
        release = threading.Event()

        def wait(self, after, timeout):
            self.release.wait(timeout)
            return self.view()
    server = serve(Held(partial_run[0]), port=0)
    host, port = server.server_address[:2]
    polls = [socket.create_connection((host, port), timeout=30) for _ in range(MAX_CONNECTIONS)]
    try:
        for s in polls:
            s.sendall(f"GET /ws/v1/cluster/info?after=1&wait=10 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        assert wait_for(lambda: server.busy() == MAX_CONNECTIONS)
        assert get(server.url, "/ws/v1/cluster/info")[0] == 503
    finally:
        Held.release.set()
        for s in polls:
            s.close()
        server.close()


def wait_for(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_the_rms_snapshot_of_the_protocol_harness_and_its_pace_ticks():
    """``rm_snapshot`` over tests/harness.py's RM state (n1 <2 cpu, 2048 MB>, n2 <1 cpu,
    1024 MB>; app a of 4 tasks <1 cpu, 512 MB>): after one step 3 tasks run (2 on n1, 1 on
    n2), 1 waits; h_a = 2 + 1 = 3, so its task share is 3/3 = 1.0 and its dominant share
    3 x max(1/3, 512/3072) = 1.0.  The pace meter's ticks are counted once each."""
    from harness import Harness

    from rayrm.rm.runtime.pace import PaceMeter
    from rayrm.rm.ui.snapshot import APP_FIELDS, rm_snapshot

    h = Harness()
    h.step()
    pace = PaceMeter(0.1)
    for late in (0.0, 0.5, 0.0):                   # one tick of three more than 0.1 s behind
        pace.tick(h.now, late)
    memo: dict = {}
    snap = rm_snapshot(h.rm, h.now, memo, pace)
    app = dict(zip(APP_FIELDS, snap["apps"][0]))
    assert (app["running"], app["pending"], app["task_share"], app["dominant_share"]) == (3, 1, 1.0, 1.0)
    assert {n: (alive, free, k) for n, alive, free, k, _ in snap["nodes"]} == \
        {"n1": (True, (0.0, 1024.0), 2), "n2": (True, (0.0, 512.0), 1)}
    assert (snap["ticks"], snap["ticks_behind"]) == (3, 1)
    pace.tick(h.now, 0.0)
    again = rm_snapshot(h.rm, h.now, memo, pace)
    assert (again["ticks"], again["ticks_behind"]) == (4, 1)


def test_the_ui_shows_a_plugins_own_share():
    """The protocol harness under examples/policies/priority_tsf.py with boost 4 for app a:
    3 tasks run, h_a = 3, so its own share is n / (h w b) = 3 / (3 · 1 · 4) = 0.25 where its
    task share is 3 / 3 = 1.0; the UI and the scheduler API show 0.25 under the plugin's kind."""
    from pathlib import Path

    from harness import Harness

    from rayrm.rm.ui import yarn
    from rayrm.rm.ui.snapshot import rm_snapshot

    spec = str(Path(__file__).resolve().parents[1] / "examples" / "policies" / "priority_tsf.py") \
        + ":PriorityTSF:prefix=a:boost=4"
    h = Harness(policy=spec)
    h.step()
    view = LiveSource(parse_config(TINY), spec, 1.0, fetch=lambda: None).update(rm_snapshot(h.rm, h.now, {}))
    app = view.app("a")
    assert (view.share_kind, app.task_share, view.share_of(app)) == ("priority-tsf_share", 1.0, 0.25)
    leaf = yarn.scheduler(view)["scheduler"]["schedulerInfo"]["rootQueue"]["childQueues"]["queue"][0]
    row = leaf["apps"]["app"][0]
    assert (row["shareKind"], row["share"], row["taskShare"]) == ("priority-tsfShare", 0.25, 1.0)
