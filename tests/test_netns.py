"""Replays on three machines of their own: network namespaces joined by a bridge, each with
its own address and ``ray start`` (examples/cluster/netns.sh; a head with no CPU, two
workers with 2), and faults at the network layer under Ray as well as under rayrm.

The micro-benchmark (tsf-paper Table II: 50 NMs, 4 jobs, 1,350 tasks), driven from the
head machine with ``rayrm replay --address``:

* with no fault, its NMs and containers run on the worker machines, 25 NMs each;
* a worker's link cut for 10 wall seconds (past Ray's health check here, 5 × 1 s), a
  worker's processes all killed, or the head and a worker dropping each other's packets
  for 10 s: each time Ray declares the worker dead, its NM host's 25 NMs are lost for good
  and its AM host is made again on the other worker; every task finishes exactly once,
  no app fails, ``rayrm check`` is OK.

Needs root and iproute2 (CI has both); skipped with the reason elsewhere.
"""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("ray")

from netns_cluster import HeadLine, NetnsCluster, unavailable  # noqa: E402

from rayrm.rm.runs.check import check_run  # noqa: E402
from rayrm.rm.runs.reader import RunDir  # noqa: E402

WHY = unavailable()
pytestmark = pytest.mark.skipif(bool(WHY), reason=WHY or "")
FAULT_AT = 3.0            # wall seconds after the replay's actors are up
CUT = 10.0                # wall seconds: twice Ray's 5 s to declare a silent node dead
SCALE = "0.03"            # the faults' replays: 442 trace s take 13 wall s without a fault


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = NetnsCluster(tmp_path_factory.mktemp("netns"))
    c.up()
    c.line = HeadLine(c)
    yield c
    c.line.close()
    c.down()


@pytest.fixture
def healed(cluster):
    cluster.heal()                     # a worker an earlier test took down is back
    return cluster


def _summary(out):
    return json.loads((out / "summary.json").read_text())


def _all_tasks_once(out) -> dict:
    """The invariants every test asserts: ``rayrm check`` OK, 1,350 tasks (1000 + 150 + 100 +
    100) finished, none twice, none missing, no job failed."""
    result = check_run(out)
    assert result.ok, result.report()
    summary = _summary(out)
    assert summary["tasks"]["finished"] == 1350 and summary["tasks_finished_twice"] == 0
    assert result.tasks_missing == 0 and summary["jobs"] == {"finished": 4}
    return summary


def test_replay_runs_nms_and_containers_on_the_worker_machines(healed, tmp_path):
    out = tmp_path / "run"
    rc, log = healed.finish(out, healed.replay(out))
    assert rc == 0, log[-3000:]
    summary = _all_tasks_once(out)
    where = summary["ray_node_addresses"]                  # Ray node id -> its machine's address
    workers = {healed.ips["worker1"], healed.ips["worker2"]}
    assert where[summary["driver_ray_node"]] == healed.ips["head"]
    # 50 NMs over two workers of 2 CPUs each, the head offering none: 25 per worker
    assert sorted((where[r], n) for r, n in summary["nm_per_ray_node"].items()) == \
        [(healed.ips["worker1"], 25), (healed.ips["worker2"], 25)]
    assert {where[r] for r in summary["am_host_ray_nodes"].values()} == workers
    run = RunDir(out)
    node_machine = {n: where[r] for n, r in zip(run.nodes.node, run.nodes.ray_node)}
    # every container ran on an NM of a worker machine (the executor runs it in its NM's host)
    assert {node_machine[n] for n in run.tasks.node} == workers


def _faulted(cluster, tmp_path, inject, heal) -> tuple[dict, RunDir, str]:
    """A replay with ``inject()`` run FAULT_AT s after its start and ``heal()`` CUT s later."""
    out = tmp_path / "run"
    proc = cluster.replay(out, "--time-scale", SCALE)
    start = cluster.line.wait_started()
    time.sleep(max(0.0, start + FAULT_AT - time.time()))     # the fault's time on the wall clock
    inject()
    time.sleep(CUT)
    heal()
    rc, log = cluster.finish(out, proc)
    assert rc == 0, log[-3000:]
    return _all_tasks_once(out), RunDir(out), log


def _lost_with(summary: dict, run: RunDir, machine_ip: str) -> None:
    """The machine's NM host was lost with its Ray node: its 25 NMs declared lost, and its AM
    host made again on the other worker."""
    where = summary["ray_node_addresses"]
    on_it = sorted(n for n, r in zip(run.nodes.node, run.nodes.ray_node) if where[r] == machine_ip)
    assert len(on_it) == 25
    lost = summary["hosts_lost_with_ray_nodes"]
    nm_host = next(h for h, r in summary["nm_host_ray_nodes"].items() if where[r] == machine_ip)
    assert lost["nm_hosts_lost"] == [nm_host]
    am_host = next(h for h, r in summary["am_host_ray_nodes"].items() if where[r] == machine_ip)
    assert [(m["host"], where[m["from"]]) for m in lost["am_hosts_moved"]] == [(am_host, machine_ip)]
    assert where[lost["am_hosts_moved"][0]["to"]] != machine_ip
    departed = run.events[run.events.kind == "node_lost"]
    assert set(on_it) <= set(departed.node)


def test_a_workers_link_cut_past_rays_health_check(healed, tmp_path):
    summary, run, _ = _faulted(healed, tmp_path, lambda: healed.script("link", "worker1", "down"),
                               lambda: healed.script("link", "worker1", "up"))
    _lost_with(summary, run, healed.ips["worker1"])


def test_a_worker_machines_processes_all_killed(healed, tmp_path):
    summary, run, _ = _faulted(healed, tmp_path, lambda: healed.script("kill", "worker2"), lambda: None)
    _lost_with(summary, run, healed.ips["worker2"])


def test_the_head_and_a_worker_cut_off_from_each_other(healed, tmp_path):
    """Only head <-> worker1 drops: worker1 still reaches worker2, but Ray's GCS on the head
    hears nothing from it, and neither does the RM."""
    summary, run, _ = _faulted(healed, tmp_path, lambda: healed.script("block", "head", "worker1"),
                               lambda: healed.script("unblock", "head", "worker1"))
    _lost_with(summary, run, healed.ips["worker1"])
