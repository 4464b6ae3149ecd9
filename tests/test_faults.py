"""Fault injection in short Ray replays (one local Ray session for the module).

The config is test_replay's: a1, a2 <cpu:2; memory_mb:2048; disk=ssd>, b1, b2 <cpu:1;
memory_mb:2048>; j1 = 20 tasks of <1 cpu, 512 MB> (about 5 s each) from t=0, j2 = 10
tasks of <0.5 cpu, 512 MB> (4 s, disk == ssd) from t=2; time scale 0.05, so one trace
second is 50 ms and the 1-second floor on NM and AM expiry is 20 trace seconds.

Each test injects one fault kind and checks, from the run directory, that the fault
was detected the way it should be, that the replay recovered, and that ``rayrm check``
holds: no over-allocation, no constraint violation, every task finished exactly once.
"""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")

from samples import SMALL, small_config  # noqa: E402

from rayrm.rm.runs.check import check_run  # noqa: E402
from rayrm.rm.core.errors import InputError  # noqa: E402
from rayrm.rm.runs.recovery import recovery_times  # noqa: E402
from rayrm.rm.runtime.driver import replay  # noqa: E402
from rayrm.rm.runs.reader import RunDir  # noqa: E402


def events(run: RunDir, kind: str):
    ev = run.events
    return ev[ev.kind == kind]


def run_with(tmp_path, fault: str, **run_settings):
    cfg = small_config(run=dict(SMALL["run"], **run_settings)) if run_settings else small_config()
    summary = replay(cfg, out=tmp_path, faults=[fault], progress=False)
    result = check_run(tmp_path)
    assert result.ok, result.report()
    assert summary["tasks"]["finished"] == 30 and summary["tasks_finished_twice"] == 0
    assert summary["faults"]["injected"] == [fault]
    return summary, RunDir(tmp_path)


def test_a_crashed_nm_is_lost_by_heartbeat_expiry_and_its_tasks_rerun(local_ray, tmp_path):
    _, run = run_with(tmp_path, "kill-nm:b1@3")
    lost = events(run, "node_lost")
    assert list(lost.node) == ["b1"] and lost.detail.iloc[0].startswith("no heartbeat")
    t = run.tasks
    on_b1 = t[(t.node == "b1") & (t.status == "lost")]
    assert len(on_b1) >= 1                               # a task was running there
    for row in on_b1.itertuples():                       # ... and finished elsewhere, once
        again = t[(t.app == row.app) & (t.task == row.task) & (t.status == "finished")]
        assert len(again) == 1 and again.node.iloc[0] != "b1"
    # nothing starts on b1 from its crash until it registers again (restarted empty)
    back = events(run, "node_join")
    back = back[(back.node == "b1") & (back.time > 3)].time
    until = back.iloc[0] if len(back) else float("inf")
    on = t[t.node == "b1"]
    assert not ((on.start > 3.1) & (on.start < until)).any()
    times = recovery_times(tmp_path)
    assert times[0]["kind"] == "kill-nm" and times[0]["detected"] > 0


def test_a_dead_nm_host_is_noticed_at_once_and_its_nms_register_again(local_ray, tmp_path):
    # expiry 1000 heartbeats (50 wall seconds): only the host's death can explain a quick loss
    summary, run = run_with(tmp_path, "kill-nm-host:0@3", nm_expiry=1000)
    lost = events(run, "node_lost")
    assert sorted(lost.node) == ["a1", "a2", "b1", "b2"]
    assert lost.detail.str.startswith("NM host nm-0 died").all()
    back = events(run, "node_join")
    assert sorted(back[back.time > 3].node) == ["a1", "a2", "b1", "b2"]   # Ray restarted the host
    assert summary["faults"]["nm_host_restarts"] == 1
    assert (run.tasks.status == "lost").sum() >= 1


def test_a_crashed_am_gets_a_new_attempt_that_reruns_nothing(local_ray, tmp_path):
    summary, run = run_with(tmp_path, "kill-am:j1@6")
    assert list(events(run, "am_expired").app) == ["j1"]
    assert list(events(run, "am_launch").detail) == ["attempt 2"]
    registered = events(run, "am_registered")
    assert list(registered.app) == ["j1"] and registered.detail.iloc[0].startswith("attempt 2:")
    # Work-preserving: tasks finished before the crash and containers running through
    # it are never run again, so each of j1's 20 tasks has exactly one attempt.
    j1 = run.tasks[run.tasks.app == "j1"]
    assert len(j1) == 20 and (j1.status == "finished").all()
    assert summary["faults"]["am_crashes"] == 1


def test_the_rm_restarts_recovers_and_resyncs_without_losing_work(local_ray, tmp_path):
    summary, run = run_with(tmp_path, "kill-rm@4")
    assert len(events(run, "rm_recovered")) == 1 and len(events(run, "rm_resynced")) == 1
    assert sorted(events(run, "node_resync").node) == ["a1", "a2", "b1", "b2"]
    assert summary["faults"]["rm_restarts"] == 1
    # nothing was lost or run twice: one attempt per task
    assert len(run.tasks) == 30 and (run.tasks.status == "finished").all()
    assert not (tmp_path / "rm-state").exists()          # the RM's state is removed after the run
    kinds = {r["kind"]: r for r in recovery_times(tmp_path)}
    assert kinds["kill-rm"]["recovered"] >= kinds["kill-rm"]["detected"] > 0


def test_kill_ray_node_needs_a_multi_node_cluster(local_ray, tmp_path):
    with pytest.raises(InputError, match="needs a multi-node Ray cluster"):
        replay(small_config(), out=tmp_path, faults=["kill-ray-node:1@3"], progress=False)


def test_a_stalled_rm_loses_no_nm_and_fails_no_app(local_ray, tmp_path):
    """stall-rm:10@3 blocks the RM's loop for 10 wall seconds, ten times the expiry (nm_expiry
    and am_expiry 10 heartbeats × 0.05 s = 0.5 s, floored at 1 s).  Every call queues
    meanwhile; the RM counts only silence it could have heard, so nobody expires."""
    summary, run = run_with(tmp_path, "stall-rm:10@3")
    kinds = set(run.events.kind)
    assert not kinds & {"node_lost", "am_expired", "am_launch"}, kinds
    assert (run.jobs.status == "finished").all() and (run.tasks.status == "finished").all()
    # the stall shows: the RM's loop ran at least 9 s late once
    assert summary["pace"]["lag_wall_s"]["max"] >= 9.0


def test_losing_an_am_host_relaunches_its_apps_and_leaves_the_others(local_ray, tmp_path):
    """Two AM hosts on the one Ray node: j1 (submitted first) on am-0, j2 on am-1.
    kill-am-host:1@4 kills am-1 mid-run; Ray restarts it, the RM fails j2's attempt
    (not counted against max_attempts) and launches attempt 2 there, which keeps j2's
    finished tasks and running containers.  j1 is untouched; nothing fails."""
    summary = replay(small_config(), out=tmp_path, faults=["kill-am-host:1@4"], progress=False, am_hosts=2)
    result = check_run(tmp_path)
    assert result.ok, result.report()
    assert summary["tasks"]["finished"] == 30 and summary["tasks_finished_twice"] == 0
    assert summary["faults"]["am_host_restarts"] == 1 and summary["jobs"].get("failed", 0) == 0
    run = RunDir(tmp_path)
    expired = events(run, "am_expired")
    assert list(expired.app) == ["j2"] and expired.detail.iloc[0].startswith("attempt 1: AM host am-1 died")
    assert list(events(run, "am_registered").app) == ["j2"]           # attempt 2, on the restarted host
    assert (run.jobs.status == "finished").all()
