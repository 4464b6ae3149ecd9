"""Short Ray replays on one local Ray session (module-scoped): invariants and fidelity.

The cluster: a1, a2 <cpu:2; memory_mb:2048; disk=ssd>, b1, b2 <cpu:1; memory_mb:2048>.
j1 (20 tasks of <1 cpu, 512 MB>, anywhere) arrives at 0; j2 (10 tasks of <0.5 cpu,
512 MB>, disk == ssd) at 2; j3 asks for 8 CPUs, which no node has, and is rejected.
"""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")

from samples import SMALL, small_config  # noqa: E402

from rayrm.rm.runs.check import check_run  # noqa: E402
from rayrm.rm.runtime.driver import replay  # noqa: E402
from rayrm.rm.runs.reader import RunDir  # noqa: E402


def finished_once(run: RunDir) -> bool:
    done = run.tasks[run.tasks.status == "finished"].groupby(["app", "task"]).size()
    return bool((done == 1).all())


@pytest.mark.parametrize("policy, executor", [("tsf", "actor"), ("drf", "task")])
def test_replay_holds_every_invariant(local_ray, tmp_path, policy, executor):
    summary = replay(small_config(), policy=policy, out=tmp_path, executor=executor, progress=False)
    result = check_run(tmp_path)
    assert result.ok, result.report()
    run = RunDir(tmp_path)
    assert summary["executor"] == executor
    assert summary["tasks"]["finished"] == 30 and summary["tasks_finished_twice"] == 0
    assert finished_once(run) and len(run.tasks) == 30
    # every NM names the Ray node that hosted it
    assert run.nodes["ray_node"].str.len().gt(0).all()
    # the constraint held: j2 ran only on the ssd nodes
    assert set(run.tasks[run.tasks.app == "j2"].node) <= {"a1", "a2"}
    assert summary["scheduling_latency"]["allocation_to_running_ms"]["n"] == 30


def test_a_job_no_node_can_run_is_rejected_and_the_rest_runs(local_ray, tmp_path):
    jobs = SMALL["workload"]["jobs"] + [
        {"id": "j3", "submit": 1, "tasks": 2, "demand": {"cpu": 8, "memory_mb": 512}, "duration": 1}]
    summary = replay(small_config(workload={"jobs": jobs}), out=tmp_path, progress=False)
    jobs_csv = RunDir(tmp_path).jobs.set_index("app")
    assert jobs_csv.at["j3", "status"] == "rejected"
    assert "exceeds every eligible node" in jobs_csv.at["j3", "reason"]
    assert summary["jobs"] == {"finished": 2, "rejected": 1}
    assert check_run(tmp_path).ok


def test_nodes_leaving_and_joining_mid_replay(local_ray, tmp_path):
    """b1 leaves at t=3 (its containers are lost and asked again); c1 joins at t=6."""
    cluster = dict(SMALL["cluster"], events=[
        {"time": 3, "leave": "b1"},
        {"time": 6, "join": {"name": "c1", "capacity": {"cpu": 2, "memory_mb": 2048}}}])
    summary = replay(small_config(cluster=cluster), out=tmp_path, progress=False)
    assert check_run(tmp_path).ok
    run = RunDir(tmp_path)
    assert "c1" in set(run.nodes.node) and "c1" in set(run.tasks.node)
    lost = run.tasks[run.tasks.status == "lost"]
    assert len(lost) >= 1 and set(lost.node) <= {"b1"} and (lost.finish >= 3).all()
    assert (run.tasks[run.tasks.node == "b1"].start < 3.5).all()      # nothing new on b1 after it left
    assert summary["tasks"]["finished"] == 30 and finished_once(run)


def test_replay_tracks_the_simulator_on_the_same_seed(local_ray, tmp_path):
    """Same durations, same policy: completion times and shares close to the simulator's.

    The tolerance is loose on purpose: a replay runs in real time on a shared machine,
    and each container pays a few milliseconds of protocol between its predecessor
    ending and it starting (tens of ms of trace time at this scale).
    """
    summary = replay(small_config(), out=tmp_path, twin=True, progress=False)
    ratios = summary["twin"]["completion_time_ratio"]
    assert set(ratios) == {"j1", "j2"}
    assert all(0.8 < r < 1.25 for r in ratios.values()), ratios
    # the same durations: each task's run time matches its simulated one
    mine = RunDir(tmp_path).tasks.set_index(["app", "task"])
    sim = RunDir(tmp_path / "twin").tasks.set_index(["app", "task"])
    ran = (mine.finish - mine.start) - (sim.finish - sim.start)
    assert ran.abs().max() < 1.0
    # The twin also reran the simulator with launch jitter U(0, 2 x the replay's median latency).
    spread = summary["twin"]["spread"]
    median = summary["scheduling_latency"]["allocation_to_running_trace_s"]["p50"]
    assert spread["launch_jitter_trace_s"] == pytest.approx(2 * median)
    for app in ("j1", "j2"):
        times = spread["completion_time"][app]
        assert times["min"] <= times["median"] <= times["max"]
        low, high = spread["ratio_range"][app]
        # The summary rounds times to 3 decimals (±0.0005 each) but takes the ratios from
        # the unrounded times, so a ratio rebuilt from the rounded ones may be off by up to
        # r x (0.0005/a + 0.0005/b), plus 0.00005 for the ratio's own rounding to 4 places.
        for ratio, end in ((low, "min"), (high, "max")):
            rebuilt = times[end] / times["exact"]
            slack = rebuilt * (0.0005 / times[end] + 0.0005 / times["exact"]) + 0.00005
            assert ratio == pytest.approx(rebuilt, abs=slack)
        assert spread["ratio_to_median"][app] == pytest.approx(
            ratios[app] * times["exact"] / times["median"], rel=1e-3)


def test_the_replay_cli_rejects_jobs_no_node_can_run_with_the_reason(local_ray, tmp_path, capsys):
    """Through ``rayrm replay`` (it joins this module's Ray session): a demand naming a
    resource no node has, a constraint no node matches, a demand above every eligible
    node — each rejected with its reason in jobs.csv — and the rest runs."""
    import yaml
    from samples import REASONS, REJECTS

    from rayrm.rm.cli.main import main
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(dict(REJECTS, run={"time_scale": 0.05})))
    assert main(["replay", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    assert "rejected" in capsys.readouterr().out
    jobs = RunDir(tmp_path / "out").jobs.set_index("app")
    assert jobs.at["ok", "status"] == "finished"
    assert {a: jobs.at[a, "reason"] for a in REASONS} == REASONS
    assert check_run(tmp_path / "out").ok
