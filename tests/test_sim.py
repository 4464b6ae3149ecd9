"""The discrete-event simulator: invariants on simulated runs of every policy, determinism,
nodes leaving and joining, rejection.

Each invariant is reconstructed from the run directory alone (tasks.csv, nodes.csv,
jobs.csv), independently of the scheduler's own accounting.
"""

from __future__ import annotations

import math
from collections import defaultdict

import pandas as pd
import pytest

from samples import MIXED, job

from rayrm.rm.core.config import parse_config
from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.policies import POLICY_NAMES
from rayrm.rm.sim.engine import Simulation, simulate

EPS = 1e-6




def run_dir(tmp_path, doc, policy="tsf", seed=None):
    out = tmp_path / f"{policy}-{seed}"
    summary = simulate(parse_config(doc), policy=policy, seed=seed, out=out, progress=False)
    return out, summary


def tables(out):
    tasks = pd.read_csv(out / "tasks.csv", dtype={"app": str, "node": str, "status": str})
    nodes = pd.read_csv(out / "nodes.csv", dtype=str, keep_default_na=False)
    jobs = pd.read_csv(out / "jobs.csv", dtype={"app": str, "constraint": str}, keep_default_na=False)
    return tasks, nodes, jobs


def max_overallocation(out) -> float:
    """Largest (use − capacity) over nodes, dimensions and times; attempts end before others start."""
    tasks, nodes, jobs = tables(out)
    cap = {r["node"]: (float(r["cpu"]), float(r["memory_mb"])) for _, r in nodes.iterrows()}
    demand = {r["app"]: (float(r["demand.cpu"]), float(r["demand.memory_mb"])) for _, r in jobs.iterrows()}
    changes = []
    for r in tasks.itertuples():
        d = demand[r.app]
        changes.append((r.start, 1, r.node, d))
        changes.append((r.finish if not math.isnan(r.finish) else math.inf, 0, r.node, (-d[0], -d[1])))
    use = defaultdict(lambda: [0.0, 0.0])
    worst = -math.inf
    for _, _, n, d in sorted(changes, key=lambda c: (c[0], c[1])):
        u = use[n]
        u[0] += d[0]
        u[1] += d[1]
        worst = max(worst, u[0] - cap[n][0], u[1] - cap[n][1])
    return worst


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_invariants_hold_for_every_policy(tmp_path, policy):
    out, summary = run_dir(tmp_path, MIXED, policy)
    tasks, nodes, jobs = tables(out)

    # No node is ever over-allocated (cpu and memory, at every instant).
    assert max_overallocation(out) <= EPS

    # No attempt on a node its app may not use: the constraint holds and one task fits.
    attrs = {r["node"]: {c[5:]: r[c] for c in nodes.columns if c.startswith("attr.") and r[c] != ""}
             for _, r in nodes.iterrows()}
    for app, group in tasks.groupby("app"):
        j = jobs.set_index("app").loc[app]
        cons = Constraint.parse(j["constraint"])
        for n in set(group["node"]):
            assert cons.matches(n, attrs[n]), (app, n)
            row = nodes.set_index("node").loc[n]
            assert float(j["demand.cpu"]) <= float(row["cpu"]) and \
                float(j["demand.memory_mb"]) <= float(row["memory_mb"])

    # No attempt starts on b2 while it is away (30 s to 60 s), on c2 after 45 s, on d1 before 20 s.
    assert not ((tasks["node"] == "b2") & (tasks["start"] >= 30) & (tasks["start"] < 60)).any()
    assert not ((tasks["node"] == "c2") & (tasks["start"] >= 45)).any()
    assert not ((tasks["node"] == "d1") & (tasks["start"] < 20)).any()

    # Every task of every accepted job finishes exactly once; the rejected job runs nothing.
    status = jobs.set_index("app")["status"]
    assert status["huge"] == "rejected"
    assert "exceeds every eligible node" in jobs.set_index("app").loc["huge", "reason"]
    assert "huge" not in set(tasks["app"])
    # Slots cut nodes into slots of (largest node)/14 = <0.57 cpu, 1170 MB>: an ml task needs
    # ceil(4096/1170) = 4 slots, a c node has floor(min(2/0.57, 16384/1170)) = 3 — no fit.
    rejected = {"huge", "ml"} if policy == "slots" else {"huge"}
    assert set(status[status == "rejected"].index) == rejected
    finished = tasks[tasks["status"] == "finished"]
    for app, n in jobs.set_index("app")["num_tasks"].items():
        if app in rejected:
            assert app not in set(tasks["app"])
            continue
        assert status[app] == "finished", app
        done = finished[finished["app"] == app]["task"]
        assert sorted(done) == list(range(n)), app          # each of 0..n-1 once
    assert set(tasks["status"]) <= {"finished", "lost"}
    # accepted: 40 + 60 + 12 + 50 + 8 + 30 + 20 = 220 tasks (208 without ml's 12)
    assert summary["tasks"]["finished"] == (208 if policy == "slots" else 220)

    # Attempts of a task are numbered 0, 1, ...; all but the last were lost at a node's leaving.
    for (app, task), g in tasks.groupby(["app", "task"]):
        g = g.sort_values("attempt")
        assert list(g["attempt"]) == list(range(len(g)))
        assert list(g["status"]) == ["lost"] * (len(g) - 1) + ["finished"]
        assert set(g["finish"].iloc[:-1]) <= {30.0, 45.0}


def test_leaving_node_loses_its_attempts_and_they_run_again(tmp_path):
    out, summary = run_dir(tmp_path, MIXED, "tsf")
    tasks, _, _ = tables(out)
    lost = tasks[tasks["status"] == "lost"]
    # Both departures caught running attempts (b2 is busy at 30 s, c2 at 45 s) ...
    assert set(lost["node"]) == {"b2", "c2"}
    assert set(lost[lost["node"] == "b2"]["finish"]) == {30.0}
    assert set(lost[lost["node"] == "c2"]["finish"]) == {45.0}
    assert summary["tasks"]["lost"] == len(lost) > 0
    # ... and every lost attempt was asked again at the loss and its next attempt finished.
    for r in lost.itertuples():
        nxt = tasks[(tasks["app"] == r.app) & (tasks["task"] == r.task) & (tasks["attempt"] == r.attempt + 1)]
        assert len(nxt) == 1 and nxt["submit"].iloc[0] == r.finish and nxt["start"].iloc[0] >= r.finish
    # b2 rejoined at 60 s and the joining d1 took work.
    assert ((tasks["node"] == "b2") & (tasks["start"] >= 60)).any()
    assert (tasks["node"] == "d1").any()
    events = pd.read_csv(out / "events.csv", dtype=str, keep_default_na=False)
    assert list(events[events["kind"] == "node_lost"]["node"]) == ["b2", "c2"]


def test_same_seed_same_run_other_seed_other_durations(tmp_path):
    a, _ = run_dir(tmp_path / "1", MIXED, "tsf")
    b, _ = run_dir(tmp_path / "2", MIXED, "tsf")
    c, _ = run_dir(tmp_path / "3", MIXED, "tsf", seed=8)
    assert (a / "tasks.csv").read_bytes() == (b / "tasks.csv").read_bytes()
    assert (a / "shares.csv").read_bytes() == (b / "shares.csv").read_bytes()
    assert (a / "tasks.csv").read_bytes() != (c / "tasks.csv").read_bytes()


def test_durations_are_the_jobs_own(tmp_path):
    """Each finished attempt runs exactly JobSpec.task_durations(seed)[task] (the same in every mode)."""
    cfg = parse_config(MIXED)
    out, _ = run_dir(tmp_path, MIXED, "drf")
    tasks, _, _ = tables(out)
    want = {j.job_id: j.task_durations(7) for j in cfg.jobs}
    done = tasks[tasks["status"] == "finished"]
    for r in done.itertuples():
        assert abs((r.finish - r.start) - want[r.app][r.task]) < 2e-6, (r.app, r.task)
    # 'pinned' lists its durations: task 1 and task 6 take 0 s and finish when they start.
    pinned = done[done["app"] == "pinned"].set_index("task")
    assert pinned.loc[1, "finish"] == pinned.loc[1, "start"]


def test_share_rows_follow_running_counts(tmp_path):
    """shares.csv: an app's last row at or before t gives the attempts running at t."""
    out, _ = run_dir(tmp_path, MIXED, "tsf")
    tasks, _, _ = tables(out)
    shares = pd.read_csv(out / "shares.csv")
    for t in (4.0, 22.5, 33.3, 61.0, 75.0):
        for app in ("web", "etl", "batch", "late"):
            rows = shares[(shares["app"] == app) & (shares["time"] <= t)]
            running = rows["running"].iloc[-1] if len(rows) else 0
            live = ((tasks["app"] == app) & (tasks["start"] <= t)
                    & ~(tasks["finish"] <= t)).sum()
            assert running == live, (app, t)


def test_job_whose_nodes_all_leave_ends_unfinished(tmp_path):
    doc = {"cluster": {"nodes": [{"name": "x{i}", "count": 2, "capacity": {"cpu": 1, "memory_mb": 1024},
                                  "attributes": {"gpu": "yes"}},
                                 {"name": "y1", "capacity": {"cpu": 1, "memory_mb": 1024}}],
                       "events": [{"time": 5, "leave": "x1"}, {"time": 5, "leave": "x2"}]},
           "workload": {"jobs": [job("gpujob", 0, 6, 1, 512, 4, "gpu == yes"),
                                 job("cpujob", 0, 3, 1, 512, 4)]}}
    out, summary = run_dir(tmp_path, doc)
    jobs = pd.read_csv(out / "jobs.csv", keep_default_na=False).set_index("app")
    # One task per node (1 cpu).  t=0, keys tie, app id breaks it: x1 cpujob, x2 gpujob,
    # y1 cpujob; all end at 4 s.  t=4: x1 cpujob (its last task), x2 gpujob.  t=5: x1 and
    # x2 leave, both attempts are lost; cpujob's runs again on y1, gpujob's 5 left never can.
    assert jobs.loc["gpujob", "status"] == "unfinished"
    assert jobs.loc["gpujob", "reason"].startswith("5 task(s) never ran")
    assert jobs.loc["cpujob", "status"] == "finished" and float(jobs.loc["cpujob", "finish"]) == 9.0
    assert summary["tasks"]["lost"] == 2


def test_simulation_object_exposes_the_scheduler_state(tmp_path):
    sim = Simulation(parse_config(MIXED), "tsf")
    log = sim.run(progress=False)
    # When the heap is empty nothing is left running or pending.
    assert not sim.heap and not sim.running
    assert all(a.pending == 0 for a in sim.cluster.apps.values())
    assert sum(1 for r in log.tasks.values() if r[7] == "finished") == 220


def test_leave_of_an_unknown_node_is_an_input_error(tmp_path):
    doc = {"cluster": {"nodes": [{"name": "x1", "capacity": {"cpu": 1, "memory_mb": 1024}}],
                       "events": [{"time": 5, "leave": "x9"}]},
           "workload": {"jobs": [job("j", 0, 1, 1, 512, 4)]}}
    with pytest.raises(InputError, match="node 'x9' leaves at 5 s"):
        run_dir(tmp_path, doc)


def test_pending_index_agrees_with_brute_force_through_compactions():
    """rayrm.rm.core.pending: fitting(node, free) = pending apps eligible on the node whose demand fits,
    checked against a direct scan after random arrivals, departures and pending flips
    (3,000 arrivals and 2,800 departures force several compactions: dead > max(1024, live))."""
    import random
    from rayrm.rm.core.pending import PendingIndex
    rnd = random.Random(5)
    nodes = 30
    idx = PendingIndex(2, nodes)
    live: dict[str, tuple] = {}      # app -> (demand, eligible, pending)
    for k in range(3000):
        demand = (rnd.choice([0.25, 0.5, 1.0, 2.0]), float(rnd.randrange(256, 4096, 256)))
        eligible = bytearray(int(rnd.random() < 0.4) for _ in range(nodes))
        idx.add(f"a{k}", demand, eligible)
        live[f"a{k}"] = (demand, eligible, False)
        if rnd.random() < 0.7:
            idx.set_pending(f"a{k}", True)
            live[f"a{k}"] = (demand, eligible, True)
        if len(live) > 200:
            gone = rnd.choice(sorted(live))
            idx.remove(gone)
            del live[gone]
        if k % 50 == 0:
            for m in range(nodes):
                free = (rnd.choice([0.0, 0.5, 1.0, 4.0]), float(rnd.randrange(0, 4096, 128)))
                want = {a for a, (d, e, p) in live.items()
                        if p and e[m] and d[0] <= free[0] + 1e-9 and d[1] <= free[1] + 1e-9}
                assert set(idx.fitting(m, free)) == want
                assert idx.any_fits(m, free) == bool(want)
    assert idx._dead < 1024 + len(live)          # compactions happened and kept it bounded


def test_pending_index_restored_from_a_pickle_sees_apps_added_after():
    """The RM's snapshot pickles the index: rows marked stale after the restore must be
    re-read.  Node 0 is read once with "a" pending (its row cached), the index is
    pickled and restored, then "b" arrives eligible on node 0: both fit 1 cpu free."""
    import pickle
    from rayrm.rm.core.pending import PendingIndex
    idx = PendingIndex(1, 2)
    idx.add("a", (1.0,), bytearray([1, 1]))
    idx.set_pending("a", True)
    assert idx.fitting(0, (1.0,)) == ["a"]
    restored = pickle.loads(pickle.dumps(idx))
    restored.add("b", (0.5,), bytearray([1, 0]))
    restored.set_pending("b", True)
    assert sorted(restored.fitting(0, (1.0,))) == ["a", "b"]
    assert restored.fitting(1, (1.0,)) == ["a"]


TWO_JOBS = {
    "name": "two-jobs",
    "cluster": {"nodes": [{"name": "n1", "capacity": {"cpu": 2, "memory_mb": 2048}}]},
    "workload": {"jobs": [job("A", 0, 4, 1, 512, 10), job("B", 1, 2, 1, 512, 10)]},
}


def test_compare_tabulates_tsf_against_fifo(tmp_path):
    """One 2-cpu node; A (4 tasks) at 0 s, B (2 tasks) at 1 s, every task 1 cpu for 10 s.

    TSF (h_A = h_B = 2): A0 A1 at 0; at 10 the tie on task share goes to A (earlier), then
    B's share 0 < A's 1/2: A2, B0; at 20 likewise A3, B1.  FIFO: A0 A1, then A2 A3 at 10,
    B0 B1 at 20.  Task queueing delays — TSF: A 0 0 10 20, B 9 19; FIFO: A 0 0 10 10, B 19 19.
    Per-task speedup D_FIFO − D_TSF: 0 0 0 −10 | +10 0 -> shortened 1/6, equal 4/6, lengthened 1/6.
    Completion: TSF A 30, B 29; FIFO A 20, B 29 -> per-job speedup (C_P − C_TSF)/C_P: A −0.5,
    B 0; both in the <=10 bin: mean −0.25.
    """
    import yaml
    from rayrm.rm.cli.compare import compare
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump(TWO_JOBS))
    table = compare(path, ["tsf", "fifo"], tmp_path / "cmp", log=lambda *a: None)
    fifo = table.loc["fifo"]
    assert fifo["tasks_tsf_shortened"] == pytest.approx(1 / 6)
    assert fifo["tasks_tsf_equal"] == pytest.approx(4 / 6)
    assert fifo["tasks_tsf_lengthened"] == pytest.approx(1 / 6)
    assert fifo["job_speedup_<=10"] == pytest.approx(-0.25)
    assert table.loc["tsf", "makespan"] == 30 and fifo["makespan"] == 30
    assert table.loc["tsf", "task_delay_mean"] == pytest.approx((0 + 0 + 10 + 20 + 9 + 19) / 6)
    written = pd.read_csv(tmp_path / "cmp" / "comparison.csv", index_col="policy")
    assert written.loc["fifo", "tasks_tsf_shortened"] == pytest.approx(1 / 6, abs=1e-5)
    assert (tmp_path / "cmp" / "tsf" / "tasks.csv").exists()


def test_compare_ray_mode_without_the_replay_is_one_input_error(tmp_path, monkeypatch):
    import sys
    from rayrm.rm.cli.compare import run_policies
    monkeypatch.setitem(sys.modules, "rayrm.rm.runtime.driver", None)       # import rm.replay -> ImportError
    with pytest.raises(InputError, match="--mode ray needs the Ray replay"):
        run_policies("unused.yaml", ["tsf"], tmp_path, mode="ray")
