"""yarn-fair and yarn-capacity in the Ray replay: the RM actor runs the same rm/core tree.

The tiny config: 2 nodes <cpu:4;memory_mb:4096>; queue a (max memory 2048 MB: two tasks of
<1 cpu, 1024 MB> at once) and b; six tasks of 5 s each per queue, at time scale 0.05.
Whatever order the AMs' asks reach the RM in, a never runs more than 2 tasks at once (its
max), every task finishes once, and ``rayrm check`` finds nothing wrong.
"""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")

from rayrm.rm.core.config import parse_config  # noqa: E402
from rayrm.rm.runs.check import check_run  # noqa: E402
from rayrm.rm.runs.reader import RunDir  # noqa: E402
from rayrm.rm.runtime.driver import replay  # noqa: E402

TINY = {
    "name": "yarn-tiny",
    "resources": ["cpu", "memory_mb"],
    "cluster": {"nodes": [{"name": "n{i}", "count": 2, "capacity": {"cpu": 4, "memory_mb": 4096}}]},
    "queues": [{"name": "a", "max": {"memory_mb": 2048}}, {"name": "b"}],
    "workload": {"jobs": [
        {"id": "a1", "queue": "a", "submit": 0, "tasks": 6, "demand": {"cpu": 1, "memory_mb": 1024}, "duration": 5},
        {"id": "b1", "queue": "b", "submit": 0, "tasks": 6, "demand": {"cpu": 1, "memory_mb": 1024}, "duration": 5}]},
    "run": {"seed": 1, "time_scale": 0.05},
}


def most_at_once(tasks) -> int:
    """The most attempts running together: +1 at each start, -1 at each end (ends first)."""
    events = sorted([(t, 1) for t in tasks.start] + [(t, -1) for t in tasks.finish])
    now = best = 0
    for _, step in events:
        now += step
        best = max(best, now)
    return best


@pytest.mark.parametrize("policy", ["yarn-fair", "yarn-capacity"])
def test_yarn_schedulers_run_in_the_rm_actor(local_ray, tmp_path, policy):
    summary = replay(parse_config(TINY), policy=policy, out=tmp_path, progress=False)
    result = check_run(tmp_path)
    assert result.ok, result.report()
    run = RunDir(tmp_path)
    assert summary["tasks"]["finished"] == 12 and summary["tasks_finished_twice"] == 0
    done = run.tasks[run.tasks.status == "finished"]
    assert len(done) == 12 and done.groupby(["app", "task"]).size().eq(1).all()
    # a's max: 2048 MB = 2 tasks of 1024 at once, never more
    assert most_at_once(done[done.app == "a1"]) <= 2
    assert set(run.jobs.queue) == {"root.a", "root.b"}
