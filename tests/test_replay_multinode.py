"""Replays across two Ray nodes (ray.cluster_utils.Cluster, one module-scoped cluster).

The cluster is the one ``rayrm.rm.runtime.native.ray_start_args`` asks for the small config of
test_replay: pool p0 = {a1, a2} (disk=ssd, the only nodes j2's constraint admits)
on the head, labelled ``disk=ssd``; pool p1 = {b1, b2} on the second Ray node.

* rayrm replay: a1, a2 have the attribute disk=ssd, so their NodeManagers must land
  on the Ray node labelled disk=ssd; b1, b2 balance onto the other; containers run
  on their NM's Ray node, and every invariant holds.
* ray-native: the same trace as plain Ray tasks with ``rayrm_<dim>`` resources and
  a ``rayrm-pool`` label selector; j2 runs only in pool p0.
"""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")

from samples import SMALL, small_config, small_two_node_cluster  # noqa: E402

from rayrm.rm.runs.check import check_run  # noqa: E402
from rayrm.rm.runtime.native import POOL_LABEL  # noqa: E402
from rayrm.rm.runtime.driver import replay  # noqa: E402
from rayrm.rm.runs.reader import RunDir  # noqa: E402


@pytest.fixture(scope="module")
def two_nodes():
    cluster, _ = small_two_node_cluster()
    labels = {n["NodeID"]: n.get("Labels", {}) for n in ray.nodes() if n["Alive"]}
    ssd = [nid for nid, lab in labels.items() if lab.get("disk") == "ssd"]
    assert len(labels) == 2 and len(ssd) == 1
    yield ssd[0]
    ray.shutdown()
    cluster.shutdown()


@pytest.mark.parametrize("executor", ["task", "actor"])
def test_nms_spread_over_both_ray_nodes_and_invariants_hold(two_nodes, tmp_path, executor):
    ssd_node = two_nodes
    summary = replay(small_config(), out=tmp_path, executor=executor, progress=False)
    assert check_run(tmp_path).ok
    run = RunDir(tmp_path)
    where = dict(zip(run.nodes.node, run.nodes.ray_node))
    assert len(set(where.values())) == 2 and summary["ray_nodes"] == 2
    assert where["a1"] == where["a2"] == ssd_node              # label disk=ssd matches
    assert where["b1"] != ssd_node and where["b2"] != ssd_node
    assert summary["tasks"]["finished"] == 30 and summary["tasks_finished_twice"] == 0


def test_am_hosts_spread_over_both_ray_nodes_and_each_app_names_its_own(two_nodes, tmp_path):
    """Both Ray nodes have a CPU, so there are two AM hosts, one on each; j1 (submitted
    first) is dealt to am-0 on the head, j2 to am-1 on the worker (round-robin by submit)."""
    summary = replay(small_config(), out=tmp_path, progress=False)
    assert check_run(tmp_path).ok
    placed = summary["am_host_ray_nodes"]
    assert summary["am_hosts"] == 2 and len(set(placed.values())) == 2
    run = RunDir(tmp_path)
    hosts = run.events[run.events.kind == "am_host"].set_index("app").detail.to_dict()
    assert hosts == {"j1": f"AM host am-0 on Ray node {placed['am-0']}",
                     "j2": f"AM host am-1 on Ray node {placed['am-1']}"}
    assert summary["tasks"]["finished"] == 30 and summary["tasks_finished_twice"] == 0


def test_ray_native_runs_the_trace_on_rays_scheduler(two_nodes, tmp_path):
    summary = replay(small_config(), policy="ray-native", out=tmp_path, progress=False)
    result = check_run(tmp_path)
    # Ray packs per pool, not per machine: a start no single node could hold is an
    # over-allocation on the trace's nodes, and the run counts it as a packing overflow.
    assert result.over_allocations <= summary["packing_overflows"]
    assert (result.constraint_violations, result.tasks_missing, result.finished_twice) == (0, 0, 0)
    run = RunDir(tmp_path)
    assert summary["policy"] == "ray-native" and summary["tasks"]["finished"] == 30
    assert set(run.tasks[run.tasks.app == "j2"].node) <= {"a1", "a2"}
    pools = {n["NodeID"]: n["Labels"][POOL_LABEL] for n in ray.nodes() if n["Alive"]}
    assert {pools[r] for r in run.nodes.ray_node} == {"p0", "p1"}


def test_losing_a_ray_node_mid_replay_loses_its_nms_and_the_tasks_rerun(two_nodes, tmp_path):
    """kill-ray-node:1@5 kills the second Ray node's raylet: the NM host there dies with
    b1 and b2; their tasks run again on a1, a2 (head); every invariant still holds.

    Runs last in this module: the cluster has one node afterwards.
    """
    ssd_node = two_nodes
    # Slower than the other tests (4 wall seconds per 20 trace seconds, j1's tasks 10 s), so
    # the raylet's death, its workers exiting and NM expiry all happen mid-replay.
    jobs = [dict(SMALL["workload"]["jobs"][0], duration={"mean": 10, "jitter": 0.2}),
            SMALL["workload"]["jobs"][1]]
    summary = replay(small_config(workload={"jobs": jobs}), out=tmp_path, time_scale=0.2,
                     faults=["kill-ray-node:1@5"], progress=False)
    result = check_run(tmp_path)
    assert result.ok, result.report()
    run = RunDir(tmp_path)
    lost = run.events[run.events.kind == "node_lost"]
    assert sorted(lost.node) == ["b1", "b2"]
    assert summary["tasks"]["finished"] == 30 and summary["tasks"]["lost"] >= 1
    later = run.tasks[run.tasks.start > lost.time.max()]
    assert len(later) and set(later.node) <= {"a1", "a2"}     # only the head's NMs are left
    where = dict(zip(run.nodes.node, run.nodes.ray_node))
    assert {where[n] for n in later.node} == {ssd_node}
