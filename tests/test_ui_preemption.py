"""Preemption per queue in YARN's scheduler view and on the page, read by a real YARN client
and headless Chromium.

The instance is configs/queues-preemption.yaml (worked by hand there): 16 slots of
<1 CPU, 1024 MB>; a1 (queue a) holds all 16 from t = 0, b1 (queue b) arrives at 10 and
starves; at 70 a's 8 newest containers are warned, at 85 they are killed.  Cut at t = 80
the 8 are warned and still running; run to the end they are preempted and none is warned.
"""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from rayrm.rm.core.config import parse_config
from rayrm.rm.service.calls import Call
from rayrm.rm.sim.engine import simulate
from rayrm.rm.ui.live import LiveSource
from rayrm.rm.ui.rundir import RunDirSource
from rayrm.rm.ui.server import serve
from rayrm.rm.ui.yarn import scheduler

yarn_api_client = pytest.importorskip("yarn_api_client")

CONFIG = yaml.safe_load((Path(__file__).resolve().parents[1] / "configs" / "queues-preemption.yaml").read_text())


def fair_doc() -> dict:
    """The example on a Fair tree: equal weights instead of capacities 50/50 (the same fair
    share, 1/2 each, so the same victims)."""
    doc = copy.deepcopy(CONFIG)
    doc["queues"] = [{"name": "a"}, {"name": "b"}]
    return doc


@pytest.fixture(scope="module")
def cut_at_80(tmp_path_factory):
    out = tmp_path_factory.mktemp("cut80")
    simulate(parse_config(copy.deepcopy(CONFIG)), out=out, progress=False, until=80)
    server = serve(RunDirSource(out), port=0)
    yield out, server.url
    server.close()


def capacity_leaves(url: str) -> dict:
    from yarn_api_client.resource_manager import ResourceManager
    info = ResourceManager(service_endpoints=[url.rstrip("/")]).cluster_scheduler().data["scheduler"]["schedulerInfo"]
    assert info["type"] == "capacityScheduler"
    return {q["queuePath"]: q for q in info["queues"]["queue"]}


def test_a_yarn_client_reads_the_containers_warned_per_queue(cut_at_80):
    _, url = cut_at_80
    a, b = capacity_leaves(url).values()
    # t = 80: a's 8 newest containers warned at 70 (deadline 85), none killed yet
    assert (a["queuePath"], a["containersWarned"], a["aggregateContainersPreempted"]) == ("root.a", 8, 0)
    assert (b["containersWarned"], b["aggregateContainersPreempted"]) == (0, 0)
    assert a["preemptionDisabled"] is False and a["preemptedResourceMB"] == 0


def test_after_the_kills_each_queue_counts_its_containers_preempted(tmp_path):
    simulate(parse_config(copy.deepcopy(CONFIG)), out=tmp_path / "cap", progress=False)
    server = serve(RunDirSource(tmp_path / "cap"), port=0)
    try:
        a, b = capacity_leaves(server.url).values()
    finally:
        server.close()
    # 8 containers of <1 CPU, 1024 MB> killed at 85: 8192 MB, 8 vcores; none warned after
    assert (a["aggregateContainersPreempted"], a["preemptedResourceMB"], a["preemptedResourceVCores"]) == (8, 8192, 8)
    assert (a["containersWarned"], b["aggregateContainersPreempted"]) == (0, 0)


def test_the_fair_shape_marks_queues_preemptable_and_counts_up_the_tree(tmp_path):
    simulate(parse_config(fair_doc()), out=tmp_path / "fair", progress=False)
    root = scheduler(RunDirSource(tmp_path / "fair").view())["scheduler"]["schedulerInfo"]["rootQueue"]
    a, b = root["childQueues"]["queue"]
    assert (a["queueName"], a["preemptable"], a["aggregateContainersPreempted"]) == ("root.a", True, 8)
    # root sums its subtree: a's 8, b's 0
    assert (root["aggregateContainersPreempted"], root["preemptedResourceMB"], b["aggregateContainersPreempted"]) \
        == (8, 8192, 0)
    off = fair_doc()
    del off["preemption"]
    simulate(parse_config(off), out=tmp_path / "off", progress=False, until=80)
    a_off = scheduler(RunDirSource(tmp_path / "off").view())["scheduler"]["schedulerInfo"]["rootQueue"]
    assert (a_off["preemptable"], a_off["aggregateContainersPreempted"], a_off["containersWarned"]) == (False, 0, 0)


def test_the_live_source_takes_warned_containers_from_the_rm_snapshot():
    cfg = parse_config(copy.deepcopy(CONFIG))
    source = LiveSource(cfg, "tsf", 1.0, fetch=lambda: None)
    nodes = [(f"n{i}", True, (0.0, 0.0), 4, 1000.0) for i in range(1, 5)]
    base = {"wall": 1000.0, "start_wall": 1000.0, "allocations": 16, "finished": 0, "epoch": 0, "lag": 0.0,
            "behind": False, "ticks": 1, "ticks_behind": 0, "nodes": nodes}
    apps = [("a1", "running", 0.0, 0.0, None, "", 1, 0, 16, 24, 1.0, 1.0, 16),
            ("b1", "running", 10.0, None, None, "", 1, 0, 0, 20, 0.0, 0.0, 16)]
    # the RM's counts at t = 80 (Preemptions.counts): 8 of a1's containers warned, none preempted
    view = source.update(dict(base, time=80.0, apps=apps,
                              preemption={"apps": {}, "queues": {}, "warned": 8, "spared": 0, "preempted": 0,
                                          "warned_apps": {"a1": 8}}))
    assert view.preemption and view.app("a1").warned == 8
    a, b = scheduler(view)["scheduler"]["schedulerInfo"]["queues"]["queue"]
    assert (a["containersWarned"], a["aggregateContainersPreempted"], b["containersWarned"]) == (8, 0, 0)


def test_the_page_lists_each_queues_preemption(cut_at_80):
    import browser     # tests/browser.py: headless Chromium over DevTools

    if browser.chromium() is None:
        pytest.skip("no chromium (Debian: apt-get install chromium; .ci/run installs it)")
    _, url = cut_at_80
    page = browser.Browser(url)
    try:
        page.wait_until("Number(document.body?.dataset.updates ?? 0) >= 1", timeout=60)
        shown = page.evaluate("""(() => ({
            hidden: document.getElementById('queues-panel').hidden,
            note: document.getElementById('queues-note').textContent,
            rows: [...document.querySelectorAll('#queue-table tbody tr')].map(
                (tr) => [...tr.cells].map((c) => c.textContent.trim()))}))()""")
    finally:
        page.close()
    assert shown["hidden"] is False and shown["note"] == "(preemption on)"
    # queue, share, owed, containers, preempted, warned now: at t = 80 a holds all 16 slots
    # (share 1), owed 1/2 (b's demand gives each 1/2); 8 of its containers warned
    assert shown["rows"] == [["root.a", "1.000", "0.500", "16", "0", "8"],
                             ["root.b", "0.000", "0.500", "0", "0", "0"]]


class OneVictim:
    """Rules that warn container 1 of app a (deadline ``deadline``) at the first decision at or
    after ``at``, and nothing else (the API of rm/core's rules: ``decide(now, scheduler)``)."""

    def __init__(self, at: float, deadline: float):
        self.at, self.deadline, self.done = at, deadline, False

    def decide(self, now, scheduler):
        if now < self.at or self.done:
            return []
        self.done = True
        return [SimpleNamespace(container=1, app="a", source="root.a", starved="root.b", deadline=self.deadline)]


def run(c, until: float) -> None:
    """Heartbeats to ``until``, the RM's preemption call after each (as the RM actor's monitor)."""
    while c.now < until:
        c.step()
        c.apply(Call.PREEMPT)


def test_the_rm_snapshot_counts_each_apps_containers_warned_now(monkeypatch):
    # tests/harness.py's protocol harness with 10 s tasks: container 1 (app a) is warned at
    # t = 2 with deadline 5, killed at 5, its end reported at 7
    import harness

    from rayrm.rm.ui.snapshot import rm_snapshot

    monkeypatch.setattr(harness, "DURATION", 10.0)
    c = harness.Harness(preemption=OneVictim(2.0, 5.0))
    run(c, 3)
    assert rm_snapshot(c.rm, c.now, {})["preemption"]["warned_apps"] == {"a": 1}
    run(c, 7)
    counts = rm_snapshot(c.rm, c.now, {})["preemption"]
    assert (counts["warned_apps"], counts["apps"]) == ({}, {"a": 1})
