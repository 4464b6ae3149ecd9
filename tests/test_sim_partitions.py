"""Partitions in the simulator (partition-nm-host): an NM host cut off from the RM for D.

Small instances worked by hand, as in test_sim_faults: nodes of <1 cpu, 1 GB>, tasks of
<1 cpu, 512 MB> lasting 10 s, heartbeat h = 1 s and time scale 1, so an expiry of k
heartbeats is k trace seconds.  Two NM hosts: the nodes a, b are dealt to nm-0, nm-1.
A host cut off is silent as a whole: the RM loses its NMs after E_host = host_silence x
E_nm, the replay's rule; ``host_silence: 1`` is YARN's (E_host = E_nm).
"""

from __future__ import annotations

import pandas as pd
import pytest

from rayrm.rm.core.config import parse_config
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.faults import nm_host_of
from rayrm.rm.runs.check import check_run
from rayrm.rm.runs.reader import RunDir
from rayrm.rm.sim.engine import simulate


def cluster(*names):
    return {"nodes": [{"name": n, "capacity": {"cpu": 1, "memory_mb": 1024}} for n in names]}


def job(id, tasks, submit=0, duration=10, constraint=""):
    return {"id": id, "submit": submit, "tasks": tasks, "demand": {"cpu": 1, "memory_mb": 512},
            "duration": duration, "constraint": constraint}


def config(nodes, jobs, faults=(), **run):
    return {"name": "partitions", "cluster": nodes, "workload": {"jobs": jobs}, "faults": list(faults),
            "run": {"seed": 1, "heartbeat_interval": 1, **run}}


def sim(tmp_path, doc):
    out = tmp_path / "run"
    return simulate(parse_config(doc), out=out, progress=False), RunDir(out)


def attempts(run: RunDir) -> list[tuple]:
    """(app, task, attempt, node, submit, start, finish, status) of every attempt, sorted."""
    t = run.tasks.sort_values(["app", "task", "attempt"])
    return [(r.app, r.task, r.attempt, r.node, r.submit, r.start, r.finish, r.status)
            for r in t.itertuples(index=False)]


def events(run: RunDir, kind: str) -> list[tuple]:
    """(time, app, node, detail) of the events of ``kind``."""
    ev = run.events[run.events.kind == kind]
    return [(r.time, *("" if pd.isna(x) else x for x in (r.app, r.node, r.detail)))
            for r in ev.itertuples(index=False)]


def test_a_partition_past_the_expiry_loses_the_nodes_tasks_and_ignores_their_late_finish(tmp_path):
    # j: 4 tasks on a and b; t0 on a and t1 on b at 0.  nm-1 (b) is cut off at 5 for 20 s;
    # E_host = 1 x 3 < 20, so the RM declares b lost at 5 + 3 = 8: t1's attempt 0 ends lost
    # at 8 and t1 is asked again (submit 8).  a frees at 10 and takes t1 again (retries
    # first) until 20, then t2 until 30.  On b, cut off, t1's first container runs on and
    # finishes at 10, unheard.  At 5 + 20 = 25 b registers again (node_join) and reports it:
    # the RM had given it up, so its finish is ignored (ignored_finish at 25), never t1's.
    # b takes t3 at 25 until 35.
    _, run = sim(tmp_path, config(cluster("a", "b"), [job("j", 4)], ["partition-nm-host:1@5+20"],
                                  nm_expiry=3, nm_hosts=2, host_silence=1))
    assert attempts(run) == [
        ("j", 0, 0, "a", 0.0, 0.0, 10.0, "finished"),
        ("j", 1, 0, "b", 0.0, 0.0, 8.0, "lost"),
        ("j", 1, 1, "a", 8.0, 10.0, 20.0, "finished"),
        ("j", 2, 0, "a", 0.0, 20.0, 30.0, "finished"),
        ("j", 3, 0, "b", 0.0, 25.0, 35.0, "finished"),
    ]
    assert events(run, "fault") == [(5.0, "", "", "partition-nm-host:1@5+20 (nm-1)")]
    assert events(run, "node_lost") == [(8.0, "", "b", "no heartbeat for 3 trace s")]
    assert [e for e in events(run, "node_join") if e[0] > 0] == [(25.0, "", "b", "")]
    assert events(run, "ignored_finish") == [(25.0, "j", "b", "finished after the RM gave it up (COMPLETE)")]
    assert events(run, "cleanup") == []
    assert run.jobs.set_index("app").at["j", "completion_time"] == 35.0
    assert check_run(run.path).ok


def test_a_container_still_running_at_the_heal_is_killed(tmp_path):
    # As above with tasks of 30 s and a cut of 5..15: b is lost at 8, t1's attempt 0 (0-30)
    # still runs on b at the heal, 15: the RM tells the NM to kill it (cleanup at 15).
    # t1 again on b from 15 (a is busy with t0 until 30) until 45.
    _, run = sim(tmp_path, config(cluster("a", "b"), [job("j", 2, duration=30)], ["partition-nm-host:1@5+10"],
                                  nm_expiry=3, nm_hosts=2, host_silence=1))
    assert events(run, "cleanup") == [(15.0, "j", "b", "the NM runs a container the RM holds COMPLETE")]
    assert events(run, "ignored_finish") == []
    assert attempts(run) == [
        ("j", 0, 0, "a", 0.0, 0.0, 30.0, "finished"),
        ("j", 1, 0, "b", 0.0, 0.0, 8.0, "lost"),
        ("j", 1, 1, "b", 8.0, 15.0, 45.0, "finished"),
    ]
    assert check_run(run.path).ok


def test_a_partition_within_the_expiry_loses_nothing_and_delays_what_the_rm_hears(tmp_path):
    # Cut 5..11 (D = 6) with nm_expiry 3 and the default host_silence 30: E_host = 90 > 6,
    # so b is never lost (with host_silence 1 it would be, at 8, as above).  t1 finishes on b at 10, unheard;
    # at the heal, 11, the RM hears its finish (finish 10, the NM's time) and only then frees
    # b, which takes t3 at 11 until 21.  a: t0 0-10, t2 10-20.  Completion 21 (20 without).
    _, run = sim(tmp_path, config(cluster("a", "b"), [job("j", 4)], ["partition-nm-host:1@5+6"],
                                  nm_expiry=3, nm_hosts=2))
    assert attempts(run) == [
        ("j", 0, 0, "a", 0.0, 0.0, 10.0, "finished"),
        ("j", 1, 0, "b", 0.0, 0.0, 10.0, "finished"),
        ("j", 2, 0, "a", 0.0, 10.0, 20.0, "finished"),
        ("j", 3, 0, "b", 0.0, 11.0, 21.0, "finished"),
    ]
    assert events(run, "node_lost") == [] and events(run, "ignored_finish") == []
    assert check_run(run.path).ok


def test_nm_hosts_deal_the_nodes_as_the_replays_placement_on_equal_ray_nodes(tmp_path):
    from rayrm.nodes.placement import RayNode, place_nodes
    cfg = parse_config(config(cluster("a", "b", "c", "d", "e"), [job("j", 1)]))
    # a..e to 3 hosts in turn: 0, 1, 2, 0, 1; the replay's place_nodes on 3 unlabelled Ray
    # nodes of 4 CPUs (fewest NMs per CPU, ties to the first) deals them alike
    assert nm_host_of(cfg, 3) == {"a": 0, "b": 1, "c": 2, "d": 0, "e": 1}
    ray_nodes = [RayNode(f"r{i}", "", 4.0) for i in range(3)]
    placed = place_nodes(cfg.nodes, ray_nodes)
    assert {n: int(r.node_id[1:]) for n, r in placed.items()} == nm_host_of(cfg, 3)
    with pytest.raises(InputError, match=r"the run has 2 NodeManager hosts \(0..1\)"):
        sim(tmp_path, config(cluster("a", "b"), [job("j", 1)], ["partition-nm-host:2@5+5"], nm_hosts=2))


AM_JOBS = [job("j1", 3, 0, constraint="node in (a)"), job("j2", 3, 1, constraint="node in (b)")]


def test_an_am_host_partition_past_the_expiry_fails_the_attempt_and_the_next_registers_at_the_heal(tmp_path):
    # Two AM hosts: j1 (submit 0) -> am-0, j2 (submit 1) -> am-1; j1 runs 0-10, 10-20, 20-30
    # on a, j2 1-11, 11-21, 21-31 on b.  am-0 is cut off at 5 for 20 s, E_host = 1 x 3 = 3:
    # j1's attempt 1 fails at 8 (counted: 1 of 2) and attempt 2 is launched; the launch
    # crosses the link when it heals, at 25, and attempt 2 registers a heartbeat later, 26.
    # t0 finishes at 10 (its NM reports it); the container the RM allocates to j1 at 10
    # waits for attempt 2, which starts it at 26: t1 26-36, t2 36-46.  j2 runs as without.
    _, run = sim(tmp_path, config(cluster("a", "b"), AM_JOBS, ["partition-am-host:0@5+20"], am_expiry=3,
                                  am_hosts=2, host_silence=1))
    assert attempts(run) == [
        ("j1", 0, 0, "a", 0.0, 0.0, 10.0, "finished"),
        ("j1", 1, 0, "a", 0.0, 26.0, 36.0, "finished"),
        ("j1", 2, 0, "a", 0.0, 36.0, 46.0, "finished"),
        ("j2", 0, 0, "b", 1.0, 1.0, 11.0, "finished"),
        ("j2", 1, 0, "b", 1.0, 11.0, 21.0, "finished"),
        ("j2", 2, 0, "b", 1.0, 21.0, 31.0, "finished"),
    ]
    assert events(run, "am_expired") == [(8.0, "j1", "", "attempt 1 silent for 3 trace s")]
    assert events(run, "am_launch") == [(8.0, "j1", "", "attempt 2")]
    assert events(run, "am_registered") == [(26.0, "j1", "", "attempt 2: 1 tasks finished, 0 running")]
    # at the heal attempt 1's next allocate is refused: attempt 2 replaced it
    assert events(run, "fenced") == [(25.0, "j1", "", "allocate from attempt 1; the current attempt is 2")]
    assert set(run.jobs.status) == {"finished"}
    assert check_run(run.path).ok


def test_an_am_host_partition_within_the_expiry_only_delays_its_allocations(tmp_path):
    # am-0 cut 5..15 with am_expiry 3 and the default host_silence 30 (E_host = 90 > 10): no
    # attempt fails.  The container allocated to j1 at 10 reaches its AM at the heal, 15:
    # t1 15-25, t2 25-35.
    _, run = sim(tmp_path, config(cluster("a", "b"), AM_JOBS, ["partition-am-host:0@5+10"], am_expiry=3,
                                  am_hosts=2))
    assert [a[5:7] for a in attempts(run) if a[0] == "j1"] == [(0.0, 10.0), (15.0, 25.0), (25.0, 35.0)]
    assert events(run, "am_expired") == [] and events(run, "am_registered") == [] and events(run, "fenced") == []
    assert check_run(run.path).ok


def test_an_am_host_cut_across_an_rm_restart_registers_again_at_the_heal(tmp_path):
    # am-0 (j1) cut 5..15, E_host = 30 x 3 = 90: it never expires.  The RM dies at 7, has
    # rebuilt its state at 7 + 2 = 9 and asks everyone to register again at 9 + 1 = 10: j2
    # (am-1) does at once (t0 running on b since 1); j1, cut off, is waited for.  At the heal,
    # 15, j1's call is answered RESYNC and it registers again (t0 finished at 10, the
    # container allocated to it at 10 not started yet): nobody is waited for any more,
    # 15 - 9 = 6 trace s after recovery.  j1's next tasks run 15-25 and 25-35, as without.
    _, run = sim(tmp_path, config(cluster("a", "b"), AM_JOBS, ["partition-am-host:0@5+10", "kill-rm@7"],
                                  am_expiry=3, am_hosts=2, rm_restart=2))
    assert events(run, "am_resync") == [(10.0, "j2", "", "attempt 1: 0 tasks finished, 1 running"),
                                        (15.0, "j1", "", "attempt 1: 1 tasks finished, 0 running")]
    assert events(run, "rm_resynced") == [(15.0, "", "", "epoch 1: every NM and AM registered again "
                                                         "6 trace s after recovery")]
    assert [a[5:7] for a in attempts(run) if a[0] == "j1"] == [(0.0, 10.0), (15.0, 25.0), (25.0, 35.0)]
    assert events(run, "am_expired") == [] and events(run, "fenced") == []
    assert check_run(run.path).ok


PARTITIONED = ["kill-nm:a1@8", "kill-am:web@6", "kill-rm@20", "kill-nm:b3@25", "kill-am:batch@15",
               "partition-nm-host:1@12+30", "partition-am-host:0@18+25", "kill-rm@40", "kill-nm:d1@22",
               "partition-nm-host:0@50+3", "partition-am-host:1@45+2", "partition-nm-host:2@35+40"]


# cdrf is left out: once every node an app may use is gone (here rack c, lost and left), its
# key n_i / h_i^c is 0 x inf = NaN inline (rm/core/scheduler.py _set_key) and the offer
# order breaks, with node leaves alone and no fault at all
@pytest.mark.parametrize("policy", ["tsf", "drf", "fifo", "drfh-bf", "pm-drf", "slots"])
@pytest.mark.parametrize("host_silence", [1, 30])
def test_every_task_finishes_exactly_once_under_partitions_and_crashes(tmp_path, policy, host_silence):
    from samples import MIXED
    run = dict(MIXED["run"], nm_expiry=4, am_expiry=3, rm_restart=2, am_hosts=2, nm_hosts=3,
               host_silence=host_silence)
    summary = simulate(parse_config(dict(MIXED, faults=PARTITIONED, run=run)), policy=policy, out=tmp_path,
                       progress=False, launch_jitter=0.7)
    result = check_run(tmp_path)
    assert result.ok, result.report()
    assert summary["faults"]["not_simulated"] == {} and summary["tasks"]["killed"] == 0
    # E_host = 1 x 4 loses the NMs cut for 30 and 40 s; 30 x 4 = 120 loses none
    lost_nodes = set(RunDir(tmp_path).events.query("kind == 'node_lost' and detail.notna()").node)
    assert ({"a2", "b1", "b4", "a3", "c1"} <= lost_nodes) == (host_silence == 1)
