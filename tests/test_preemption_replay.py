"""Preemption in a Ray replay: the RM actor decides by the rules of rm/core, the AM host is
told, the NM host kills at the deadline, the task runs again (one local Ray session for the
module).

The config (``TWO_QUEUES``): 4 nodes <cpu:2; 8 GB> = 8 slots; queue a's job a1 asks 16 tasks
of <1 cpu, 512 MB> lasting 20 s from t = 0 and takes all 8 slots; queue b's job b1 asks 4
such tasks lasting 5 s at t = 2 and finds none free.  Preemption (rm/core/queues/preemption.py):
both queues active, equal weights, so b's instantaneous fair share F_b = 1/2 (its demand
share is 4/8 = 1/2 too); its dominant share 0 < θ F_b = 0.5 × 1/2, so b is starved from
t = 2; after ``fair_share_timeout`` = 3 it asks back k = ⌈(1/2 − 0) / (1/8)⌉ = 4 containers
(one task's dominant share is 1 cpu of 8), at most its 4 pending tasks.  a holds 8/8 and its
own F_a = 1/2 = 4 slots, so it can give exactly 4: the 4 newest containers of a1, warned at
t >= 5 and killed ``grace`` = 3 s later, well before a's first wave ends at t ≈ 21.  Every
task finishes once: the 4 preempted ones run again after b1.
"""

from __future__ import annotations

import json

import pytest

ray = pytest.importorskip("ray")

from rayrm.rm.core.config import parse_config  # noqa: E402
from rayrm.rm.runs.check import check_run  # noqa: E402
from rayrm.rm.runs.reader import RunDir  # noqa: E402
from rayrm.rm.runtime.driver import replay  # noqa: E402

from samples import TWO_QUEUES  # noqa: E402

def preempted_once(tmp_path, summary, grace: float = 3.0) -> RunDir:
    """The invariants and the figures worked in the module docstring (``grace``: the
    config's)."""
    result = check_run(tmp_path)
    assert result.ok, result.report()
    assert summary["tasks"]["finished"] == 20 and summary["tasks_finished_twice"] == 0
    run = RunDir(tmp_path)
    t, ev = run.tasks, run.events
    warned, killed = ev[ev.kind == "preempt_warned"], ev[ev.kind == "preempt_killed"]
    assert len(warned) == 4 and len(killed) == 4 and set(warned.container) == set(killed.container)
    assert (warned.app == "a1").all() and warned.detail.str.startswith("from root.a for root.b").all()
    assert (warned.time >= 2 + 3).all()                          # b arrived at 2, starved for 3
    assert (killed.time.to_numpy() >= warned.time.min() + grace - 1e-6).all()
    preempted = t[t.status == "preempted"]
    assert len(preempted) == 4 and set(preempted.app) == {"a1"} and (preempted.finish < 20).all()
    for task in preempted.task:                                  # run again, a new attempt, once
        again = t[(t.app == "a1") & (t.task == task)].sort_values("attempt")
        assert list(again.status) == ["preempted", "finished"]
    assert run.jobs.set_index("app").at["b1", "first_start"] < 20     # in a slot preemption freed
    p = summary["preemption"]
    assert p["warned"] == 4 and p["preempted"] == 4 and p["spared"] == 0
    assert p["queues"]["root.a"]["preempted_containers"] == 4
    lost = (preempted.finish - preempted.start).sum()            # what the killed attempts had run
    assert p["queues"]["root.a"]["lost_task_seconds"] == pytest.approx(lost, abs=0.05)
    (episode,) = p["queues"]["root.b"]["starved"]
    assert 2 <= episode["start"] < 5 and episode["restored"] is not None and episode["restored"] < 20
    proto = summary["preemption_protocol"]
    assert proto["am_messages"] == 4 and proto["nm_kills"] == 4 and proto["by_queue"] == {"root.a": 4}
    return run


def test_the_rm_preempts_for_a_starved_queue_and_every_task_finishes_once(local_ray, tmp_path):
    summary = replay(parse_config(TWO_QUEUES), out=tmp_path, progress=False)
    preempted_once(tmp_path, summary)
    assert json.loads((tmp_path / "summary.json").read_text())["preemption"] == summary["preemption"]
    # the replay's run directory in YARN's scheduler view: a gave 4 containers of <1 cpu, 512 MB>
    # (2048 MB, 4 vcores); none is warned after the run
    from rayrm.rm.ui.rundir import RunDirSource
    from rayrm.rm.ui.yarn import scheduler
    a, b = scheduler(RunDirSource(tmp_path).view())["scheduler"]["schedulerInfo"]["rootQueue"]["childQueues"]["queue"]
    assert (a["aggregateContainersPreempted"], a["preemptedResourceMB"], a["preemptedResourceVCores"]) == (4, 2048, 4)
    assert (a["containersWarned"], b["aggregateContainersPreempted"], a["preemptable"]) == (0, 0, True)


def test_an_rm_restart_between_warning_and_kill_neither_loses_nor_doubles_a_kill(local_ray, tmp_path):
    # The RM is killed on the first preemption warning (kill-rm@preempt_warned), however late
    # the loaded machine makes it, and restarts from its snapshot and journal in about 0.4
    # wall s (0.34-0.40 measured quiet); at time scale 1 the grace of 7 trace s is 7 wall s,
    # so the kill, due at warning + 7, comes after the restart with 6 s to spare
    doc = dict(TWO_QUEUES, run=dict(TWO_QUEUES["run"], time_scale=1.0),
               preemption=dict(TWO_QUEUES["preemption"], grace=7))
    summary = replay(parse_config(doc), out=tmp_path, faults=["kill-rm@preempt_warned"], progress=False)
    assert summary["faults"]["injected"] == ["kill-rm@preempt_warned"] and summary["faults"]["not_triggered"] == []
    run = preempted_once(tmp_path, summary, grace=7)
    ev = run.events
    (fault,) = ev[ev.kind == "fault"].itertuples()
    (recovered,) = ev[ev.kind == "rm_recovered"].itertuples()
    warned_at = ev[ev.kind == "preempt_warned"].time.min()
    assert fault.detail == "kill-rm@preempt_warned"
    assert warned_at <= fault.time < recovered.time                       # warned before the restart
    assert ev[ev.kind == "preempt_killed"].time.min() > recovered.time    # killed after it
