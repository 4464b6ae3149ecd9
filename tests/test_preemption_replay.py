"""Preemption in a Ray replay: the RM actor decides, the AM host is told, the NM host kills
at the deadline, the task runs again (one local Ray session for the module).

The config (``TWO_QUEUES``): 4 nodes <cpu:2> = 8 slots; queue a's job a1 asks 16 tasks of
<1 cpu> lasting 20 s from t = 0 and takes all 8 slots; queue b's job b1 asks 4 tasks of
<1 cpu> lasting 5 s at t = 2 and finds none free: b is starved (its fair share is 4 of 8,
its use 0) until a's first wave ends at t = 20 unless the RM preempts.  Time scale 0.1.
"""

from __future__ import annotations

import json
import tempfile

import pytest

ray = pytest.importorskip("ray")

import preempt_inject  # noqa: E402

from rayrm.rm.core.config import parse_config  # noqa: E402
from rayrm.rm.runs.check import check_run  # noqa: E402
from rayrm.rm.runs.reader import RunDir  # noqa: E402
from rayrm.rm.runtime import driver  # noqa: E402

TWO_QUEUES = {
    "name": "two-queues-preempt",
    "cluster": {"nodes": [{"name": "n{i}", "count": 4, "capacity": {"cpu": 2, "memory_mb": 8192}}]},
    "queues": [{"name": "a"}, {"name": "b"}],
    "policy": "tsf",
    "run": {"seed": 1, "time_scale": 0.1},
    "workload": {"jobs": [
        {"id": "a1", "submit": 0, "tasks": 16, "demand": {"cpu": 1, "memory_mb": 512}, "duration": 20, "queue": "a"},
        {"id": "b1", "submit": 2, "tasks": 4, "demand": {"cpu": 1, "memory_mb": 512}, "duration": 5, "queue": "b"}]},
}


@pytest.fixture
def injected(monkeypatch):
    """The RM actor decides by ``Newest(4, "a1", 4, 3)`` (tests/preempt_inject.py): 4 of a1's
    containers warned at t >= 4, killed 3 s later.  Its module travels to the RM's worker as a
    policy plugin's file does (``rm_runtime_env``)."""
    from ray._private.runtime_env.py_modules import upload_py_modules_if_needed

    def ship(policy):
        with tempfile.TemporaryDirectory() as scratch:
            env = upload_py_modules_if_needed({"py_modules": [preempt_inject.__file__]}, include_gitignore=True,
                                              scratch_dir=scratch)
        return {"runtime_env": env}

    monkeypatch.setattr(driver, "rm_runtime_env", ship)
    monkeypatch.setattr(driver, "preemption_rules", lambda cfg: preempt_inject.Newest(4.0, "a1", 4, 3.0))


def test_the_rm_warns_the_nm_kills_at_the_deadline_and_every_task_finishes_once(local_ray, tmp_path, injected):
    summary = driver.replay(parse_config(TWO_QUEUES), out=tmp_path, progress=False)
    result = check_run(tmp_path)
    assert result.ok, result.report()
    assert summary["tasks"]["finished"] == 20 and summary["tasks_finished_twice"] == 0
    run = RunDir(tmp_path)
    t, ev = run.tasks, run.events
    # 4 containers of a1, each running a 20 s task: none finishes before its deadline
    # (warned at t >= 4, killed 3 s later, before t = 20), so all 4 are killed, each once
    warned, killed = ev[ev.kind == "preempt_warned"], ev[ev.kind == "preempt_killed"]
    assert len(warned) == 4 and len(killed) == 4 and set(warned.container) == set(killed.container)
    assert (killed.time.to_numpy() >= warned.time.min() + 3.0 - 1e-6).all()
    preempted = t[t.status == "preempted"]
    assert len(preempted) == 4 and set(preempted.app) == {"a1"} and (preempted.finish < 20).all()
    # each preempted task ran again as a new attempt and finished once
    for task in preempted.task:
        again = t[(t.app == "a1") & (t.task == task)].sort_values("attempt")
        assert list(again.status) == ["preempted", "finished"]
    # b1 started in a slot freed by preemption, before a's first wave ended at t = 20
    jobs = run.jobs.set_index("app")
    assert jobs.at["b1", "first_start"] < 20
    p = summary["preemption_protocol"]
    assert p["preempted"] == 4 and p["spared"] == 0 and p["by_queue"] == {"root.a": 4}
    assert p["am_messages"] == 4 and p["nm_kills"] == 4        # told first; each killed once
    assert json.loads((tmp_path / "summary.json").read_text())["preemption_protocol"] == p
