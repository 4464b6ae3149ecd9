"""The queue tree in the UI, YARN's scheduler view, reports and sweeps: shares against what
each queue is owed, worked by hand, and read by a real YARN client.

The instance (``TREE``): two nodes of <4 cpu, 4096 MB> (total <8, 8192>); queues eng
(weight 2; children batch with max cpu 50%, and adhoc) and research (weight 1); j1 in
eng.batch (alice) and j2 in research (bob), 8 tasks of <1 cpu, 1024 MB> each, 10 s.
Simulated to t = 5: batch may hold 4 cpu (50% of 8), so it runs 4 and research the other
4.  What each queue is owed (rm/core/queues/owed.py), demand shares δ = 8 x <1, 1024> / <8, 8192> = 1:

* hi: batch min(M = 0.5, δ = 1) = 0.5, adhoc 0 (no demand), eng min(1, 1, 0.5 + 0) = 0.5,
  research min(1, 1) = 1;
* root's children: clamp(ρ·2, 0, 0.5) + clamp(ρ·1, 0, 1) = 1 at ρ = 0.5: eng 0.5, research 0.5;
* eng's children: batch 0.5 (its hi), adhoc 0;
* steady (no demand): eng 2/3, research 1/3; batch and adhoc 1/3 each (2/3 split 1:1,
  batch under its 0.5).
"""

from __future__ import annotations

import json
import urllib.request

import pandas as pd
import pytest
import yaml

from rayrm.rm.core.config import parse_config
from rayrm.rm.core.errors import InputError
from rayrm.rm.runs.queues import run_queue_history
from rayrm.rm.runs.reader import RunDir
from rayrm.rm.runs.report import write_report
from rayrm.rm.runtime.experiments import Runner
from rayrm.rm.runtime.sweep import run_sweep
from rayrm.rm.runtime.sweep_spec import cell_config, cell_identity, load_spec
from rayrm.rm.sim.engine import simulate
from rayrm.rm.ui.live import LiveSource
from rayrm.rm.core.queues.owed import queue_views
from rayrm.rm.ui.rundir import RunDirSource
from rayrm.rm.ui.server import serve
from rayrm.rm.ui.yarn import apps, scheduler

yarn_api_client = pytest.importorskip("yarn_api_client")

JOB = {"tasks": 8, "demand": {"cpu": 1, "memory_mb": 1024}, "duration": 10}
TREE = {"name": "tree",
        "cluster": {"nodes": [{"name": "n{i}", "count": 2, "capacity": {"cpu": 4, "memory_mb": 4096}}]},
        "queues": [{"name": "eng", "weight": 2, "children": [{"name": "batch", "max": {"cpu": "50%"}},
                                                              {"name": "adhoc"}]},
                   {"name": "research", "weight": 1}],
        "workload": {"jobs": [{"id": "j1", "queue": "eng.batch", "user": "alice", **JOB},
                              {"id": "j2", "queue": "root.research", "user": "bob", **JOB}]},
        "run": {"seed": 1}}


@pytest.fixture(scope="module")
def tree_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tree")
    simulate(parse_config(TREE), out=out, progress=False, until=5)
    server = serve(RunDirSource(out), port=0)
    yield out, server.url
    server.close()


def test_shares_against_what_each_queue_is_owed(tree_run):
    out, _ = tree_run
    view = RunDirSource(out).view()
    rows = {q.name: q for q in queue_views(view.tree, view.dims, view.live_total(), view.apps, view.policy)}
    got = {n: (q.share, q.owed, round(q.steady, 4)) for n, q in rows.items()}
    # batch holds 4 of 8 cpu (its max), research the other 4 (module docstring for owed and steady)
    assert got == {"root": (1.0, 1.0, 1.0), "root.eng": (0.5, 0.5, 0.6667), "root.eng.batch": (0.5, 0.5, 0.3333),
                   "root.eng.adhoc": (0.0, 0.0, 0.3333), "root.research": (0.5, 0.5, 0.3333)}
    assert rows["root.eng.batch"].max == (4.0, 8192.0)        # 50% of 8 cpu; memory unbounded: the total
    # the run directory's history: one step at t = 0 (nothing changes before t = 5)
    assert view.history.queues["root.research"] == [(0.0, 0.5, 0.5)]


def test_a_yarn_client_reads_the_fair_scheduler_tree(tree_run):
    from yarn_api_client.resource_manager import ResourceManager
    _, url = tree_run
    rm = ResourceManager(service_endpoints=[url.rstrip("/")])
    info = rm.cluster_scheduler().data["scheduler"]["schedulerInfo"]
    assert info["type"] == "fairScheduler"
    root = info["rootQueue"]
    eng, research = root["childQueues"]["queue"]
    batch, adhoc = eng["childQueues"]["queue"]
    assert [q["queueName"] for q in (root, eng, batch, adhoc, research)] == \
        ["root", "root.eng", "root.eng.batch", "root.eng.adhoc", "root.research"]
    # batch: max 4 vcores (50%), uses 4 vcores and 4096 MB, owed 0.5 of <8, 8192>
    assert (batch["maxResources"]["vCores"], batch["usedResources"]["vCores"], batch["usedResources"]["memory"]) \
        == (4, 4, 4096)
    assert (batch["fairResources"]["memory"], research["fairResources"]["vCores"]) == (4096, 4)
    # steady fair shares: eng 2/3 of 8192 MB = 5461, research 1/3 = 2731
    assert (eng["steadyFairResources"]["memory"], research["steadyFairResources"]["memory"]) == (5461, 2731)
    assert (eng["weight"], batch["type"], batch["numActiveApps"]) == (2.0, "fairSchedulerLeafQueueInfo", 1)
    # the run was cut at t = 5: its apps are no longer active, so no leaf lists them (their use stays)
    assert batch["apps"]["app"] == [] and "apps" not in eng


def test_apps_carry_and_filter_on_queue_and_user(tree_run):
    out, url = tree_run

    def ids(query):
        body = json.loads(urllib.request.urlopen(f"{url.rstrip('/')}/ws/v1/cluster/apps?{query}").read())
        return [a["id"] for a in (body["apps"] or {}).get("app", [])]

    assert ids("queue=root.eng.batch") == ["j1"] and ids("queue=eng.batch") == ["j1"]
    assert ids("queue=root.eng") == ["j1"]                 # a parent: its subtree's apps
    assert ids("queue=adhoc") == [] and ids("user=bob") == ["j2"] and ids("queue=research&user=alice") == []
    view = RunDirSource(out).view()
    body, _ = apps(view, {"user": "alice"})
    assert [(a["queue"], a["user"]) for a in body["apps"]["app"]] == [("root.eng.batch", "alice")]


def test_a_capacity_tree_in_the_capacity_schedulers_shape(tmp_path):
    # Hadoop SLS's capacity-scheduler.xml: sls_queue_1 25%, sls_queue_2 25%, sls_queue_3 50%;
    # one job of 8 tasks <1, 1024> in sls_queue_3 on the same <8, 8192>.
    cfg = dict(TREE, queues=[{"name": "sls_queue_1", "capacity": 25}, {"name": "sls_queue_2", "capacity": 25},
                             {"name": "sls_queue_3", "capacity": 50, "max_capacity": 100}],
               workload={"jobs": [{"id": "j3", "queue": "sls_queue_3", **JOB}]})
    simulate(parse_config(cfg), out=tmp_path, progress=False, until=5)
    info = scheduler(RunDirSource(tmp_path).view())["scheduler"]["schedulerInfo"]
    assert (info["type"], info["capacity"], info["queueName"]) == ("capacityScheduler", 100.0, "root")
    q1, q2, q3 = info["queues"]["queue"]
    assert [(q["queueName"], q["capacity"], q["absoluteCapacity"]) for q in (q1, q2, q3)] == \
        [("sls_queue_1", 25.0, 25.0), ("sls_queue_2", 25.0, 25.0), ("sls_queue_3", 50.0, 50.0)]
    # capacity 50 means weight 50 and min 50%: alone, j3 takes all 8 slots (queues are elastic
    # up to max_capacity 100): 100% of the cluster, 200% of its own capacity
    assert (q3["absoluteUsedCapacity"], q3["usedCapacity"], q3["numActiveApplications"]) == (100.0, 200.0, 1)
    assert (q3["type"], q3["resourcesUsed"]["vCores"], info["usedCapacity"]) == ("capacitySchedulerLeafQueueInfo", 8, 100.0)


def test_the_live_source_keeps_each_queues_share_and_owed_over_time():
    cfg = parse_config(TREE)
    source = LiveSource(cfg, "tsf", 1.0, fetch=lambda: None)
    nodes = [("n1", True, (0.0, 0.0), 4, 1000.0), ("n2", True, (4.0, 4096.0), 0, 1000.0)]
    base = {"wall": 1000.0, "start_wall": 1000.0, "allocations": 4, "finished": 0, "epoch": 0, "lag": 0.0,
            "behind": False, "ticks": 1, "ticks_behind": 0, "nodes": nodes}
    # t = 1: j1 runs 4 (batch at its max), j2 has not arrived: batch 0.5, owed 0.5 (its cap), research 0
    source.update(dict(base, time=1.0, apps=[("j1", "running", 0.0, 0.0, None, "", 1, 0, 4, 4, 0.5, 0.5, 2)]))
    # t = 2: j2 runs 4: research 0.5 of the cluster and owed 0.5 (module docstring)
    both = [("j1", "running", 0.0, 0.0, None, "", 1, 0, 4, 4, 0.5, 0.5, 2),
            ("j2", "running", 1.5, 1.5, None, "", 1, 0, 4, 4, 0.5, 0.5, 2)]
    view = source.update(dict(base, time=2.0, nodes=[("n1", True, (0.0, 0.0), 4, 1000.0),
                                                     ("n2", True, (0.0, 0.0), 4, 1000.0)], apps=both))
    assert view.history.queues["root.eng.batch"] == [(1.0, 0.5, 0.5)]
    assert view.history.queues["root.research"] == [(1.0, 0.0, 0.0), (2.0, 0.5, 0.5)]
    assert {(a.app, a.queue, a.user) for a in view.apps} == {("j1", "eng.batch", "alice"), ("j2", "research", "bob")}
    eng, research = scheduler(view)["scheduler"]["schedulerInfo"]["rootQueue"]["childQueues"]["queue"]
    batch = eng["childQueues"]["queue"][0]
    assert [(a["id"], a["user"], a["runningContainers"]) for a in batch["apps"]["app"]] == [("j1", "alice", 4)]
    assert [(a["id"], a["user"]) for a in research["apps"]["app"]] == [("j2", "bob")]


def test_report_plots_each_queues_share_against_what_it_is_owed(tmp_path):
    # TREE run to the end: batch runs j1's 8 tasks in two waves of 4 (0-10 s, 10-20 s), research
    # j2's likewise; at t = 10 each leaf still has 4 tasks to go, δ = 4/8 = 0.5, owed still 0.5.
    simulate(parse_config(TREE), out=tmp_path / "run", progress=False)
    series = run_queue_history(RunDir(tmp_path / "run"))
    assert series["root.eng.batch"] == [(0.0, 0.5, 0.5), (20.0, 0.0, 0.0)]
    assert series["root.research"] == [(0.0, 0.5, 0.5), (20.0, 0.0, 0.0)]
    assert series["root.eng.adhoc"] == [(0.0, 0.0, 0.0)]
    out, _ = write_report([tmp_path / "run"], out=tmp_path / "report")
    assert (out / "queues_tsf.png").stat().st_size > 0
    assert "queues_tsf.png" in (out / "index.html").read_text()


def _sweep_spec(tmp_path, grid):
    config = tmp_path / "tree.yaml"
    config.write_text(yaml.safe_dump(TREE))
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"workload": {"config": "tree.yaml"}, "grid": grid,
                                    "policies": ["tsf", "drf"], "seeds": [1]}))
    return load_spec(spec)


def test_a_sweep_varies_a_queues_weight(tmp_path):
    spec = _sweep_spec(tmp_path, {"queue.eng.weight": [1, 4], "queue.root.research.max_apps": [1]})
    _, four = spec.cells()
    # the cell's identity carries its queue settings; the config it simulates has them
    assert cell_identity(spec, four)["queues"] == {"queue.eng.weight": 4, "queue.root.research.max_apps": 1}
    cfg = cell_config(spec, four, tmp_path)
    assert (cfg.queues.by_path["eng"].weight, cfg.queues.by_path["research"].max_apps) == (4, 1)
    result = run_sweep(spec, tmp_path / "out", Runner(inline=True), log=lambda s: None)
    # 2 cells x 1 seed x 2 policies
    assert (result.total, result.ran, result.failed) == (4, 4, [])
    assert list(pd.read_csv(tmp_path / "out" / "sweep.csv")["queue.eng.weight"]) == [1, 4]


@pytest.mark.parametrize("grid,message", [
    ({"queue.nope.weight": [1]}, "field 'grid.queue.nope.weight': the config's queues: has no queue root.nope"),
    ({"queue.eng.colour": [1]}, "field 'grid.queue.eng.colour': a queue axis is queue.<path>.<key>"),
    ({"queue.eng.weight": ["heavy"]}, "field 'grid.queue.eng.weight': must be a list of non-negative numbers"),
])
def test_a_bad_queue_axis_names_its_field(tmp_path, grid, message):
    with pytest.raises(InputError) as e:
        _sweep_spec(tmp_path, grid)
    assert message in str(e.value)


def test_the_page_charts_each_queues_share_against_what_it_is_owed(tree_run):
    import browser     # tests/browser.py: headless Chromium over DevTools

    if browser.chromium() is None:
        pytest.skip("no chromium (Debian: apt-get install chromium; .ci/run installs it)")
    _, url = tree_run
    page = browser.Browser(url)
    try:
        page.wait_until("Number(document.body?.dataset.updates ?? 0) >= 1", timeout=60)
        drawn = page.evaluate("""(() => {
            const p = (name) => Object.assign({}, document.querySelector(`#queues path[data-name="${name}"]`).dataset);
            return {hidden: document.getElementById('queues-figure').hidden,
                    share: p('root.research'), owed: p('root.research owed'), batch: p('root.eng.batch')};
        })()""")
    finally:
        page.close()
    history = json.loads(urllib.request.urlopen(f"{url.rstrip('/')}/ws/v1/rayrm/history").read())
    # research holds 0.5 from t = 0 and is owed 0.5 (module docstring): one step; the run directory's
    # last recorded time is 0 (every attempt started at 0, none finished by t = 5), so one point
    assert history["queues"]["root.research"] == [[0.0, 0.5, 0.5]] and history["times"][-1] == 0.0
    assert drawn["hidden"] is False
    assert (int(drawn["share"]["points"]), float(drawn["share"]["lastTime"]), float(drawn["share"]["lastValue"])) \
        == (1, 0.0, 0.5)
    assert float(drawn["owed"]["lastValue"]) == 0.5 and float(drawn["batch"]["lastValue"]) == 0.5
