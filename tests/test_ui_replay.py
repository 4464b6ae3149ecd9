"""The live web UI and YARN's REST API during a real replay, read as a YARN user would.

One replay per module, started as a user starts it: ``rayrm replay`` of the TSF
micro-benchmark (configs/paper-micro.yaml: 50 nodes, 25 of <1 cpu, 1024 MB> and 25 of
<2 cpu, 1024 MB>; 4 jobs) at time scale 0.05 with ``kill-nm:n30@60``, the UI on a free
port, its URL read from the line the command prints.  ``nm_expiry`` is 60 heartbeats
(3 wall seconds): n30 is LOST from about 3 s after the kill until it restarts 3 s
later, long enough for the UI's poll (once a second) to see it.  A watcher thread long-polls the
API (``after=V``) for every new snapshot and keeps the moments n30 is LOST.

The REST API is read with yarn-api-client (PyPI), unmodified; the page is loaded in
headless Chromium (tests/browser.py) and what its charts draw is compared with the API.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import browser
import pytest
import yaml

from rayrm.rm.ui.rundir import RunDirSource
from rayrm.rm.ui.server import serve

yarn_api_client = pytest.importorskip("yarn_api_client")
pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "paper-micro.yaml"
#: MB and cpus per task of each job (configs/paper-micro.yaml) and h, the tasks each
#: could run alone on the whole cluster (tsf-paper Table II: 75, 100, 100, 75)
DEMAND = {"job1": (512, 1.0), "job2": (512, 0.5), "job3": (512, 0.5), "job4": (512, 1.0)}
H = {"job1": 75, "job2": 100, "job3": 100, "job4": 75}
WAIT = 120.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _json(url: str):
    return json.loads(urllib.request.urlopen(url, timeout=30).read())


class Live:
    """The replay's process, its UI's URL and what the watcher saw."""

    def __init__(self, out: Path):
        self.out = out / "run"
        doc = yaml.safe_load(CONFIG.read_text())
        doc["run"]["nm_expiry"] = 60
        config = out / "paper-micro.yaml"
        config.write_text(yaml.safe_dump(doc))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rayrm.rm.cli.main", "replay", str(config), "--time-scale", "0.05",
             "--fault", "kill-nm:n30@60", "--out", str(self.out), "--ui-port", str(_free_port())],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ))
        self.stdout: list[bytes] = []
        self.url = ""
        self.announced, self.lost, self.ended = threading.Event(), threading.Event(), threading.Event()
        self.lost_views: list[dict] = []
        threading.Thread(target=self._read_stderr, daemon=True).start()
        threading.Thread(target=lambda: self.stdout.extend(self.proc.stdout), daemon=True).start()

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            m = re.search(rb"watching live at (http://\S+/) ", line)
            if m and not self.url:
                self.url = m.group(1).decode()
                self.announced.set()
                threading.Thread(target=self._watch, daemon=True).start()
        self.ended.set()

    def _watch(self) -> None:
        """Every new view until the replay ends: note those with n30 LOST (with the metrics
        of that same version)."""
        version = -1
        while self.proc.poll() is None:
            try:
                over = _json(f"{self.url}ws/v1/rayrm/overview?after={version}&wait=5")
                if over["version"] == version:
                    continue
                version = over["version"]
                if over["state"] != "live":          # before t = 0 there are no nodes yet
                    continue
                node = _json(f"{self.url}ws/v1/cluster/nodes/n30?after={version - 1}")["node"]
                metrics = _json(f"{self.url}ws/v1/cluster/metrics?after={version - 1}")["clusterMetrics"]
                if node["state"] == "LOST":
                    self.lost_views.append({"node": node, "metrics": metrics})
                    self.lost.set()
            except OSError:
                return


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    replay = Live(tmp_path_factory.mktemp("ui-replay"))
    assert replay.announced.wait(WAIT), b"".join(replay.stdout)
    yield replay
    if replay.proc.poll() is None:
        replay.proc.kill()
    replay.proc.wait(timeout=60)


def client(url: str):
    from yarn_api_client.resource_manager import ResourceManager
    return ResourceManager(service_endpoints=[url.rstrip("/")])


def consistent_read(url: str) -> tuple[dict, dict, dict]:
    """(metrics, apps, nodes) of one snapshot: read again while the version moved under them."""
    rm = client(url)
    for _ in range(20):
        before = _json(f"{url}ws/v1/rayrm/overview?after=0")["version"]
        metrics = rm.cluster_metrics().data["clusterMetrics"]
        apps = (rm.cluster_applications().data["apps"] or {}).get("app", [])
        nodes = rm.cluster_nodes().data["nodes"]["node"]
        if _json(f"{url}ws/v1/rayrm/overview")["version"] == before:
            return metrics, {a["id"]: a for a in apps}, {n["id"]: n for n in nodes}
    raise AssertionError("the view changed under every read")


def test_the_replay_announces_its_ui_and_yarns_cluster_info(live):
    info = client(live.url).cluster_information().data["clusterInfo"]
    assert (info["haState"], info["policy"], info["mode"]) == ("ACTIVE", "tsf", "ray")


def test_live_metrics_apps_and_nodes_add_up(live):
    # the first whole snapshot read while apps run: one seen running by the overview may have
    # ended by the time the three reads agree (the replay's last app finishing), so the
    # snapshot read whole is the one asked
    over = _json(f"{live.url}ws/v1/rayrm/overview?after=0")
    running: list = []
    while not running and live.proc.poll() is None:
        metrics, apps, nodes = consistent_read(live.url)
        running = [a for a in apps.values() if a["state"] == "RUNNING"]
        if not running:                 # each call waits for the next snapshot
            over = _json(f"{live.url}ws/v1/rayrm/overview?after={over['version']}")
    assert running and metrics["appsRunning"] == len(running)
    # containers: the apps' = the nodes' = the cluster's; memory summed the same
    assert sum(a["runningContainers"] for a in apps.values()) == metrics["containersAllocated"] \
        == sum(n["numContainers"] for n in nodes.values())
    assert sum(a["allocatedMB"] for a in apps.values()) == metrics["allocatedMB"] \
        == sum(n["usedMemoryMB"] for n in nodes.values())
    # vCores are YARN's integers: each object rounds its own cpu sum (job2 and job3 ask 0.5),
    # so the cluster's is the rounded total of n_i x cpu_i, not a sum of rounded parts
    assert metrics["allocatedVirtualCores"] == round(sum(a["runningContainers"] * DEMAND[a["id"]][1]
                                                         for a in apps.values()))
    for a in apps.values():
        mb, cpu = DEMAND[a["id"]]
        assert (a["allocatedMB"], a["allocatedVCores"]) == (a["runningContainers"] * mb, round(a["runningContainers"] * cpu))
        if metrics["activeNodes"] == 50:
            # TSF's task share n_i / h_i (w_i = 1)
            assert a["taskShare"] == round(a["runningContainers"] / H[a["id"]], 6)
    active = [n for n in nodes.values() if n["state"] == "RUNNING"]
    # every node has 1024 MB; nodes n01-n25 1 vcore, n26-n50 2
    assert metrics["totalMB"] == 1024 * len(active) == metrics["allocatedMB"] + metrics["availableMB"]
    assert metrics["totalVirtualCores"] == sum(1 if int(n["id"][1:]) <= 25 else 2 for n in active)
    leaf = client(live.url).cluster_scheduler().data["scheduler"]["schedulerInfo"]["rootQueue"]["childQueues"]
    assert leaf["queue"][0]["schedulingPolicy"] == "tsf"


def test_a_killed_nodemanager_shows_lost(live):
    assert live.lost.wait(WAIT), "n30 was never seen LOST"
    seen = live.lost_views[0]
    # killed at t = 60: no container, and its last heartbeat came at most one interval (1 s) after
    assert seen["node"]["numContainers"] == 0 and 55 <= seen["node"]["lastHealthUpdateTraceTime"] <= 61
    assert seen["metrics"]["traceTime"] >= 60 + 60          # lost only after 60 silent heartbeats
    # the same snapshot's metrics: one lost, 49 active with 1024 MB each
    m = seen["metrics"]
    assert (m["lostNodes"], m["activeNodes"], m["totalMB"]) == (1, 49, 49 * 1024)


def test_the_page_updates_itself_and_draws_the_rms_numbers(live, tmp_path):
    if browser.chromium() is None:
        pytest.skip("no chromium (Debian: apt-get install chromium; .ci/run installs it)")
    page = browser.Browser(live.url)
    try:
        # polled in the page: a wait may start in a document the first load is replacing,
        # which has no body (or no root) yet to observe
        page.wait_until("Number(document.body?.dataset.updates ?? 0) >= 2", timeout=WAIT)
        # the chart redraws its paths in place: between two draws a path may be briefly absent
        first = page.evaluate("Number(document.querySelector('#counts path[data-name=running]')?.dataset.points ?? 0)")
        # the same page, not reloaded, draws later snapshots too
        page.wait_until(f"Number(document.querySelector('#counts path[data-name=running]')?.dataset.points ?? 0) > {first}",
                        timeout=WAIT)
        drawn = page.evaluate("""(() => {
            const p = (sel) => Object.assign({}, document.querySelector(sel).dataset);
            return {running: p('#counts path[data-name=running]'), pending: p('#counts path[data-name=pending]'),
                    cpu: p('#use path[data-name=cpu]'), state: document.body.dataset.state};
        })()""")
        if os.environ.get("RAYRM_UI_SCREENSHOTS"):
            page.screenshot(Path(os.environ["RAYRM_UI_SCREENSHOTS"]) / "ui-live.png")
    finally:
        page.close()
    history = _json(f"{live.url}ws/v1/rayrm/history")
    n = int(drawn["running"]["points"])
    assert n > first and len(history["times"]) >= n
    # the last point drawn is the API's sample n - 1: same trace time, containers, tasks, cpu use
    assert float(drawn["running"]["lastTime"]) == history["times"][n - 1]
    assert float(drawn["running"]["lastValue"]) == history["running"][n - 1]
    assert float(drawn["pending"]["lastValue"]) == history["pending"][n - 1]
    assert float(drawn["cpu"]["lastValue"]) == pytest.approx(100 * history["used"][n - 1][0])


def test_the_run_directory_served_after_the_replay_matches_its_tables(live):
    assert live.ended.wait(WAIT) and live.proc.wait(timeout=WAIT) == 0, b"".join(live.stdout)
    from rayrm.rm.runs.reader import RunDir
    run = RunDir(live.out)
    server = serve(RunDirSource(live.out), port=0)
    try:
        metrics, apps, nodes = consistent_read(server.url)
    finally:
        server.close()
    assert {a: x["state"] for a, x in apps.items()} == {a: "FINISHED" for a in DEMAND}
    assert {a: x["tasksFinished"] for a, x in apps.items()} == \
        {r.app: r.num_tasks for r in run.jobs.itertuples()} == {"job1": 1000, "job2": 150, "job3": 100, "job4": 100}
    # every attempt had a container; n30 came back after its restart (25 x 1 + 25 x 2 vcores)
    assert metrics["containersAllocatedTotal"] == len(run.tasks)
    assert (metrics["totalMB"], metrics["totalVirtualCores"], metrics["activeNodes"]) == (51200, 75, 50)
    assert nodes["n30"]["state"] == "RUNNING"
    assert "node_lost" in set(run.events[run.events.node == "n30"].kind)
