"""Faults in the simulator (rayrm.rm.sim.faults): the replay's protocol times, in trace seconds.

Small instances worked by hand.  Unless a test says otherwise: nodes of <1 cpu, 1 GB>,
tasks of <1 cpu, 512 MB> lasting exactly 10 s, heartbeat h = 1 s and time scale 1, so an
expiry of k heartbeats is k trace seconds (the 1-wall-second floor is 1 trace second).
"""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from samples import MIXED

from rayrm.rm.runs.check import check_run
from rayrm.rm.cli.main import main
from rayrm.rm.core.config import RunSettings, parse_config
from rayrm.rm.core.errors import InputError
from rayrm.rm.runs.recovery import recovery_times
from rayrm.rm.runs.reader import RunDir
from rayrm.rm.sim.engine import simulate
from rayrm.rm.sim.faults import expiry


def cluster(*names, cpu=1):
    return {"nodes": [{"name": n, "capacity": {"cpu": cpu, "memory_mb": 1024}} for n in names]}


def job(id, tasks, submit=0, duration=10, constraint=""):
    return {"id": id, "submit": submit, "tasks": tasks, "demand": {"cpu": 1, "memory_mb": 512},
            "duration": duration, "constraint": constraint}


def config(nodes, jobs, faults=(), **run):
    return {"name": "faults", "cluster": nodes, "workload": {"jobs": jobs}, "faults": list(faults),
            "run": {"seed": 1, "heartbeat_interval": 1, **run}}


def sim(tmp_path, doc, **kw):
    out = tmp_path / "run"
    summary = simulate(parse_config(doc), out=out, progress=False, **kw)
    return summary, RunDir(out)


def attempts(run: RunDir) -> list[tuple]:
    """(app, task, attempt, node, submit, start, finish, status) of every attempt, sorted."""
    t = run.tasks.sort_values(["app", "task", "attempt"])
    return [(r.app, r.task, r.attempt, r.node, r.submit, r.start, r.finish, r.status)
            for r in t.itertuples(index=False)]


def events(run: RunDir, kind: str) -> list[tuple]:
    ev = run.events
    ev = ev[ev.kind == kind]
    return [(r.time, *("" if pd.isna(x) else x for x in (r.app, r.node, r.detail)))
            for r in ev.itertuples(index=False)]


def starts(run: RunDir, app: str | None = None) -> pd.Series:
    t = run.tasks
    return t[t.app == app].start if app else t.start


def test_expiry_is_the_replays_heartbeats_with_its_one_wall_second_floor():
    # E = max(k h, 1 s / time scale): 10 x 1 s at scale 1; at paper-micro's 0.05 the
    # floor wins, 1 / 0.05 = 20 trace s (as test_faults and docs/results-failures.md measure).
    assert expiry(10, RunSettings(heartbeat_interval=1.0, time_scale=1.0)) == 10
    assert expiry(10, RunSettings(heartbeat_interval=1.0, time_scale=0.05)) == 20
    assert expiry(3, RunSettings(heartbeat_interval=2.0, time_scale=1.0)) == 6


def test_a_job_only_a_crashed_nm_can_run_waits_for_it_to_come_back(tmp_path):
    # b, the one ssd node, crashes at 1; nm_expiry 3: lost at 4, back (empty) at 1 + 2 x 3
    # = 7.  s (disk == ssd) arrives at 5, while b is lost: not rejected (b comes back), it
    # runs on b from 7 to 17.  A config leave is for good: x arrives after b left at 20
    # and is rejected.
    nodes = {"nodes": [{"name": "a", "capacity": {"cpu": 1, "memory_mb": 1024}},
                       {"name": "b", "capacity": {"cpu": 1, "memory_mb": 1024}, "attributes": {"disk": "ssd"}}],
             "events": [{"time": 20, "leave": "b"}]}
    doc = config(nodes, [job("s", 1, submit=5, constraint="disk == ssd"),
                         job("x", 1, submit=25, constraint="disk == ssd")], ["kill-nm:b@1"], nm_expiry=3)
    _, run = sim(tmp_path, doc)
    assert attempts(run) == [("s", 0, 0, "b", 5.0, 7.0, 17.0, "finished")]
    jobs = run.jobs.set_index("app")
    assert list(jobs.status) == ["finished", "rejected"]
    assert jobs.at["x", "reason"] == "no node matches constraint 'disk == ssd'"


def test_an_nm_crash_the_rm_learns_of_at_its_resync_is_measured_there(tmp_path):
    # b crashes at 5 and the RM at 6 (back at 7, before b's expiry at 8 could be judged):
    # b restarts empty at 5 + 2 x 3 = 11 and registers into the restarted RM, which loses
    # task 1's attempt (on b since 0) then.  The crash is detected at 11 (6 s after it);
    # task 1 runs again at once on b: recovered 6; work lost 5 - 0 = 5 task-s.  b leaving
    # the cluster at 35 is another matter, not this crash's detection.
    nodes = dict(cluster("a", "b"), events=[{"time": 35, "leave": "b"}])
    _, run = sim(tmp_path, config(nodes, [job("j", 4)], ["kill-nm:b@5", "kill-rm@6"], nm_expiry=3))
    assert events(run, "node_resync")[-1] == (11.0, "", "b", "0 containers reported")
    crash = recovery_times(run.path)[0]
    assert (crash["fault"], crash["detected"], crash["recovered"], crash["lost_attempts"], crash["work_lost"]) == \
        ("kill-nm:b@5", 6.0, 6.0, 1, 5.0)


def test_kill_nm_loses_its_attempt_at_expiry_and_the_nm_comes_back_empty(tmp_path):
    # j: 4 tasks on a and b.  t0 on a and t1 on b at 0.  b crashes at 5; nm_expiry 3, so
    # the RM declares it lost at 5 + 3 = 8: t1's attempt 0 ends lost at 8 and t1 is asked
    # again (submit 8).  a frees at 10 and takes t1 (retries first) until 20.  b restarts
    # empty at 5 + 2 x 3 = 11 and takes t2 until 21; a takes t3 at 20 until 30.
    # Completion 30 (20 without the fault).
    _, run = sim(tmp_path, config(cluster("a", "b"), [job("j", 4)], ["kill-nm:b@5"], nm_expiry=3))
    assert attempts(run) == [
        ("j", 0, 0, "a", 0.0, 0.0, 10.0, "finished"),
        ("j", 1, 0, "b", 0.0, 0.0, 8.0, "lost"),
        ("j", 1, 1, "a", 8.0, 10.0, 20.0, "finished"),
        ("j", 2, 0, "b", 0.0, 11.0, 21.0, "finished"),
        ("j", 3, 0, "a", 0.0, 20.0, 30.0, "finished"),
    ]
    assert events(run, "fault") == [(5.0, "", "b", "kill-nm:b@5")]
    assert events(run, "node_lost") == [(8.0, "", "b", "no heartbeat for 3 trace s")]
    assert events(run, "lost") == [(8.0, "j", "b", "no heartbeat for 3 trace s")]
    assert [e for e in events(run, "node_join") if e[0] > 0] == [(11.0, "", "b", "")]
    assert run.jobs.set_index("app").at["j", "completion_time"] == 30.0
    assert check_run(run.path).ok
    # bench_recovery: detected 8 - 5 = 3, t1 running again at 10: recovered 5
    (r,) = recovery_times(run.path)
    assert (r["detected"], r["recovered"], r["lost_attempts"]) == (3.0, 5.0, 1)
    # b crashes again at 15, after it came back at 11: t2 (on b since 11) is lost at 18 and
    # that loss is the second fault's; the first keeps detected 3, recovered 5, 1 attempt
    _, again = sim(tmp_path / "again", config(cluster("a", "b"), [job("j", 4)], ["kill-nm:b@5", "kill-nm:b@15"],
                                             nm_expiry=3))
    first, second = recovery_times(again.path)
    assert (first["detected"], first["recovered"], first["lost_attempts"]) == (3.0, 5.0, 1)
    assert (second["detected"], second["lost_attempts"]) == (3.0, 1)


def test_a_dead_nm_holds_its_resources_and_refuses_what_the_rm_still_places_there(tmp_path):
    # b has 2 cpus; j's one task runs there from 0, k (1 task of 4 s, b only) arrives at 3.
    # b crashes at 2 and is lost at 2 + 3 = 5.  At 3 the RM, which counts b alive with one
    # cpu free, places k there; the dead NM refuses it and the AM releases the container
    # one heartbeat later, at 4, and asks again: placed on b again at 4, that container
    # goes with the node at 5.  b is back at 2 + 6 = 8: j's task (lost at 5) and k start
    # there, and k finishes at 12.
    doc = config(cluster("a", "b", cpu=2), [job("j", 1, constraint="node in (b)"),
                                           job("k", 1, submit=3, duration=4, constraint="node in (b)")],
                 ["kill-nm:b@2"], nm_expiry=3)
    _, run = sim(tmp_path, doc)
    assert events(run, "release") == [(4.0, "k", "b", "the NM refused the launch: b is down")]
    assert attempts(run) == [
        ("j", 0, 0, "b", 0.0, 0.0, 5.0, "lost"),
        ("j", 0, 1, "b", 5.0, 8.0, 18.0, "finished"),
        ("k", 0, 0, "b", 3.0, 8.0, 12.0, "finished"),
    ]
    assert check_run(run.path).ok


def test_kill_am_holds_the_apps_new_containers_until_the_next_attempt_registers(tmp_path):
    # j: 3 tasks in a row on one node, 0-10, 10-20, 20-30 without faults.  Its AM crashes at
    # 5; t0 runs on and finishes at 10.  The RM allocates a's container to j at 10 but
    # nobody starts it.  am_expiry 7: attempt 1 fails at 5 + 7 = 12, attempt 2 registers a
    # heartbeat later, at 13, and starts t1 then: 13-23, t2 23-33.  Completion 30 + (13 - 10) = 33.
    _, run = sim(tmp_path, config(cluster("a"), [job("j", 3)], ["kill-am:j@5"], am_expiry=7))
    assert attempts(run) == [
        ("j", 0, 0, "a", 0.0, 0.0, 10.0, "finished"),
        ("j", 1, 0, "a", 0.0, 13.0, 23.0, "finished"),
        ("j", 2, 0, "a", 0.0, 23.0, 33.0, "finished"),
    ]
    s = starts(run, "j")
    assert not ((s > 5) & (s < 13)).any()
    assert events(run, "am_expired") == [(12.0, "j", "", "attempt 1 silent for 7 trace s")]
    assert events(run, "am_launch") == [(12.0, "j", "", "attempt 2")]
    assert events(run, "am_registered") == [(13.0, "j", "", "attempt 2: 1 tasks finished, 0 running")]
    assert run.jobs.set_index("app").at["j", "completion_time"] == 33.0
    (r,) = recovery_times(run.path)
    assert (r["detected"], r["recovered"]) == (7.0, 8.0)


def test_the_last_attempt_failing_fails_the_app_and_kills_its_containers(tmp_path):
    # As above, and attempt 2 crashes too, at 15, while t1 runs (13-23).  With
    # max_attempts 2 its expiry at 15 + 7 = 22 fails the app: t1 is killed at 22.
    _, run = sim(tmp_path, config(cluster("a"), [job("j", 3)], ["kill-am:j@5", "kill-am:j@15"], am_expiry=7))
    assert attempts(run)[1] == ("j", 1, 0, "a", 0.0, 13.0, 22.0, "killed")
    j = run.jobs.set_index("app").loc["j"]
    assert (j["status"], j["finish"], j["reason"]) == ("failed", 22.0, "2 of 2 attempts failed")
    assert events(run, "app_failed") == [(22.0, "j", "", "")]


def test_kill_rm_stops_scheduling_until_the_nms_and_ams_resync(tmp_path):
    # j: 3 tasks on a and b (t0, t1 at 0-10); k (1 task of 5 s) arrives at 9.  The RM dies
    # at 8; rm_restart 3: it has recovered at 8 + 3 = 11 and everyone has registered again
    # a heartbeat later, at 12.  t0 and t1 still finish at 10, but nothing starts before
    # 12; k's registration waits for the RM too (submit 12, as the replay's RM records it).
    # t2 on a 12-22, k on b 12-17: j completes at 22 (20 without the fault).
    doc = config(cluster("a", "b"), [job("j", 3), job("k", 1, submit=9, duration=5)], ["kill-rm@8"],
                 rm_restart=3)
    summary, run = sim(tmp_path, doc)
    s = starts(run)
    assert not ((s >= 8) & (s < 12)).any()
    assert attempts(run) == [
        ("j", 0, 0, "a", 0.0, 0.0, 10.0, "finished"),
        ("j", 1, 0, "b", 0.0, 0.0, 10.0, "finished"),
        ("j", 2, 0, "a", 0.0, 12.0, 22.0, "finished"),
        ("k", 0, 0, "b", 12.0, 12.0, 17.0, "finished"),
    ]
    assert events(run, "rm_recovered") == [
        (11.0, "", "", "epoch 1; state rebuilt 3 trace s after the RM died (run.rm_restart)")]
    assert events(run, "node_resync") == [(12.0, "", "a", "0 containers reported"),
                                          (12.0, "", "b", "0 containers reported")]
    assert events(run, "am_resync") == [(12.0, "j", "", "attempt 1: 2 tasks finished, 0 running")]
    assert events(run, "rm_resynced") == [
        (12.0, "", "", "epoch 1: every NM and AM registered again 1 trace s after recovery")]
    assert summary["faults"]["rm_restarts"] == 1
    (r,) = recovery_times(run.path)
    assert (r["detected"], r["recovered"]) == (3.0, 4.0)


def test_an_nm_crashed_across_an_rm_restart_expires_after_the_resync(tmp_path):
    # b crashes at 5 with nm_expiry 4 (lost at 9, back at 5 + 8 = 13 without the RM fault),
    # but the RM dies at 6; rm_restart 0: it has resynchronised at 6 + 0 + 1 = 7, and its
    # liveness clocks start again then: b is lost at 7 + 4 = 11.  rm_resynced waits for it.
    _, run = sim(tmp_path, config(cluster("a", "b"), [job("j", 4)], ["kill-nm:b@5", "kill-rm@6"],
                                  nm_expiry=4, rm_restart=0))
    assert events(run, "node_lost") == [(11.0, "", "b", "no heartbeat for 4 trace s")]
    assert events(run, "rm_resynced")[0][0] == 11.0
    assert [e[0] for e in events(run, "node_join") if e[0] > 0] == [13.0]
    assert check_run(run.path).ok


def test_an_nm_restarting_before_the_restarted_rm_expires_it_is_reconciled(tmp_path):
    # b crashes at 5 with nm_expiry 3; the RM dies at 6 and, with rm_restart 2, has
    # resynchronised at 6 + 2 + 1 = 9, so b would expire at 12 — but b's NM restarts at
    # 5 + 6 = 11 and registers with nothing running: t1's attempt is lost then
    # (the node service's reconcile on registering) and b, never declared lost, takes work at once.
    _, run = sim(tmp_path, config(cluster("a", "b"), [job("j", 4)], ["kill-nm:b@5", "kill-rm@6"],
                                  nm_expiry=3, rm_restart=2))
    assert events(run, "node_lost") == []
    assert events(run, "node_resync")[-1] == (11.0, "", "b", "0 containers reported")
    assert events(run, "lost") == [(11.0, "j", "b", "not reported by its NM when it registered again")]
    assert events(run, "rm_resynced")[0][0] == 11.0
    assert check_run(run.path).ok


def test_faults_on_ray_processes_are_recorded_not_simulated(tmp_path, capsys):
    doc = config(cluster("a", "b"), [job("j", 4)])
    _, plain = sim(tmp_path / "plain", doc)
    summary, run = sim(tmp_path, doc, faults=["kill-nm-host:0@3", "kill-ray-node:1@4"])
    assert [(t, d.split(":")[0]) for t, _, _, d in events(run, "fault_not_simulated")] == [
        (3.0, "kill-nm-host"), (4.0, "kill-ray-node")]
    assert attempts(run) == attempts(plain)
    assert set(summary["faults"]["not_simulated"]) == {"kill-nm-host:0@3", "kill-ray-node:1@4"}
    # the command says so, one line each, on stderr
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["simulate", str(path), "--fault", "kill-ray-node:1@4", "--out", str(tmp_path / "cli"),
                 "--no-progress"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [("rayrm simulate: fault kill-ray-node:1@4 not simulated: a simulation has no Ray nodes "
                    "(kill-nm crashes one NM)")]


MIXED_FAULTS = ["kill-nm:a1@8", "kill-am:web@6", "kill-rm@20", "kill-nm:b3@25", "kill-am:batch@15",
                "kill-nm-host:0@10", "kill-rm@40", "kill-nm:d1@22", "kill-am:etl@41"]


@pytest.mark.parametrize("policy", ["tsf", "drf", "cdrf", "fifo", "drfh-bf", "pm-drf", "slots"])
@pytest.mark.parametrize("jitter", [0.0, 0.7])
def test_every_task_finishes_exactly_once_under_mixed_faults(tmp_path, policy, jitter):
    doc = dict(MIXED, faults=MIXED_FAULTS, run=dict(MIXED["run"], nm_expiry=4, am_expiry=3, rm_restart=2))
    summary = simulate(parse_config(doc), policy=policy, out=tmp_path, progress=False, launch_jitter=jitter)
    result = check_run(tmp_path)
    assert result.ok, result.report()
    assert summary["faults"]["simulated"] == [f for f in sorted(MIXED_FAULTS, key=lambda f: float(f.split("@")[1]))
                                              if not f.startswith("kill-nm-host")]
    assert summary["tasks"]["lost"] >= 1 and summary["tasks"]["killed"] == 0


def test_runs_with_faults_are_deterministic(tmp_path):
    doc = dict(MIXED, faults=MIXED_FAULTS)
    for k in (1, 2):
        simulate(parse_config(doc), out=tmp_path / str(k), progress=False)
    for name in ("tasks.csv", "events.csv", "shares.csv", "jobs.csv"):
        assert (tmp_path / "1" / name).read_text() == (tmp_path / "2" / name).read_text()


def test_paper_micro_with_the_readmes_faults_passes_check(tmp_path, capsys):
    from rayrm.rm.cli.replay import bundled_config
    out = tmp_path / "run"
    assert main(["simulate", str(bundled_config()), "--fault", "kill-nm:n30@60", "--fault", "kill-am:job2@50",
                 "--fault", "kill-rm@100", "--out", str(out), "--no-progress"]) == 0
    assert "faults: kill-am:job2@50, kill-nm:n30@60, kill-rm@100" in capsys.readouterr().out
    assert check_run(out).ok
    # at time scale 0.05 both expiries are the 1-wall-second floor, 20 trace seconds
    run = RunDir(out)
    assert events(run, "node_lost")[0][:3] == (80.0, "", "n30")
    assert events(run, "am_expired")[0][:2] == (70.0, "job2")


def test_rm_restart_is_checked_like_the_other_run_settings():
    doc = config(cluster("a"), [job("j", 1)], rm_restart=-1)
    with pytest.raises(InputError, match=r"field 'run.rm_restart': must not be negative, got -1"):
        parse_config(doc)


def test_am_host_of_deals_apps_in_submit_order_as_the_replay_does():
    from rayrm.rm.core.faults import am_host_of
    cfg = parse_config(config(cluster("a"), [job("z", 1, submit=0), job("y", 1, submit=2),
                                             job("x", 1, submit=2), job("w", 1, submit=1)]))
    # by (submit, id): z(0), w(1), x(2), y(2) -> hosts 0, 1, 2, 0 of three; all 0 of one
    assert am_host_of([j.app for j in cfg.jobs], 3) == {"z": 0, "w": 1, "x": 2, "y": 0}
    assert set(am_host_of([j.app for j in cfg.jobs], 0).values()) == {0}


def test_kill_am_host_is_kill_am_of_each_of_its_apps_uncounted(tmp_path):
    # Two AM hosts; by submit time j1 (0) -> am-0, j2 (1) -> am-1, j3 (2) -> am-0.  Each job
    # has its own node: j1 runs 0-10, 10-20, 20-30 on a; j2 1-11, 11-21, 21-31 on b; j3
    # 2-12, 12-22, 22-32 on c.  am-0 dies at 5: the AMs of j1 and j3 crash (kill-am), their
    # running tasks run on (j1 t0 to 10, j3 t0 to 12) and the containers allocated at 10
    # and 12 wait.  am_expiry 7: both attempts fail at 5 + 7 = 12, attempt 2 registers a
    # heartbeat later, at 13, and starts what waited: j1 t1 13-23, t2 23-33; j3 t1 13-23,
    # t2 23-33.  max_attempts 1, and no app fails: attempts lost with their host do not count.
    # j2, on am-1, runs as without the fault.
    jobs = [job("j1", 3, 0, constraint="node in (a)"), job("j2", 3, 1, constraint="node in (b)"),
            job("j3", 3, 2, constraint="node in (c)")]
    doc = config(cluster("a", "b", "c"), jobs, ["kill-am-host:0@5"], am_expiry=7, max_attempts=1, am_hosts=2)
    summary, run = sim(tmp_path, doc)
    assert attempts(run) == [
        ("j1", 0, 0, "a", 0.0, 0.0, 10.0, "finished"),
        ("j1", 1, 0, "a", 0.0, 13.0, 23.0, "finished"),
        ("j1", 2, 0, "a", 0.0, 23.0, 33.0, "finished"),
        ("j2", 0, 0, "b", 1.0, 1.0, 11.0, "finished"),
        ("j2", 1, 0, "b", 1.0, 11.0, 21.0, "finished"),
        ("j2", 2, 0, "b", 1.0, 21.0, 31.0, "finished"),
        ("j3", 0, 0, "c", 2.0, 2.0, 12.0, "finished"),
        ("j3", 1, 0, "c", 2.0, 13.0, 23.0, "finished"),
        ("j3", 2, 0, "c", 2.0, 23.0, 33.0, "finished"),
    ]
    assert events(run, "fault") == [(5.0, "", "", "kill-am-host:0@5 (am-0)")]
    assert events(run, "am_expired") == [(12.0, "j1", "", "attempt 1: AM host am-0 died"),
                                         (12.0, "j3", "", "attempt 1: AM host am-0 died")]
    assert events(run, "am_registered") == [(13.0, "j1", "", "attempt 2: 1 tasks finished, 0 running"),
                                            (13.0, "j3", "", "attempt 2: 1 tasks finished, 0 running")]
    assert set(run.jobs.status) == {"finished"}
    assert summary["faults"]["simulated"] == ["kill-am-host:0@5"] and summary["faults"]["am_crashes"] == 2
    assert check_run(run.path).ok
    # kill-am of j1 alone, counted: with max_attempts 1 it fails the app at 12
    _, alone = sim(tmp_path / "alone", dict(doc, faults=["kill-am:j1@5"]))
    assert alone.jobs.set_index("app").at["j1", "status"] == "failed"
    # host 2 of 2 does not exist
    with pytest.raises(InputError, match="2 ApplicationMaster hosts"):
        sim(tmp_path / "bad", dict(doc, faults=["kill-am-host:2@5"]))
