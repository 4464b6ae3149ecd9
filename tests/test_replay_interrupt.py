"""Interrupted replays keep what happened: --until, and SIGTERM mid-run.

The cluster: n1, n2 <cpu:2; memory_mb:2048>; one job "long" of 40 tasks of <1 cpu,
512 MB>, 10 trace seconds each, from t = 0: 4 run at once, so it needs 10 waves,
100 trace seconds (5 wall seconds at time scale 0.05).
"""

from __future__ import annotations

import os
import signal
import threading

import pytest

ray = pytest.importorskip("ray")

from rayrm.rm.core.config import parse_config  # noqa: E402
from rayrm.rm.runs.check import check_run  # noqa: E402
from rayrm.rm.runs.reader import RunDir  # noqa: E402
from rayrm.rm.runtime.driver import replay  # noqa: E402

LONG = {"name": "long",
        "cluster": {"nodes": [{"name": "n{i}", "count": 2, "capacity": {"cpu": 2, "memory_mb": 2048}}]},
        "workload": {"jobs": [{"id": "long", "submit": 0, "tasks": 40, "demand": {"cpu": 1, "memory_mb": 512},
                               "duration": 10}]},
        "policy": "tsf", "run": {"seed": 1, "time_scale": 0.05}}


def test_until_stops_the_replay_and_writes_a_partial_run_that_check_accepts(local_ray, tmp_path):
    summary = replay(parse_config(LONG), out=tmp_path, until=25, progress=False)
    assert summary["interrupted"] is True and summary["interrupt_reason"] == "--until 25 reached"
    run = RunDir(tmp_path)
    assert run.jobs.set_index("app").at["long", "status"] == "unfinished"
    # by t = 25 the first wave of 4 has finished (t ~ 10.5) and usually the second (~ 21):
    # at least 4 tasks, never all 40
    finished = int((run.tasks.status == "finished").sum())
    assert 4 <= finished < 40
    result = check_run(tmp_path)
    assert result.ok and result.interrupted == "--until 25 reached" and result.jobs_unfinished == 1, \
        result.report()
    assert not [a for a in ray.util.list_named_actors(all_namespaces=True) if "rayrm" in str(a)]


def test_sigterm_ends_the_replay_within_seconds_and_leaves_the_run(local_ray, tmp_path):
    # SIGTERM 2 wall seconds in (t = 40 of 100): the handler asks the supervisor to stop
    timer = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        summary = replay(parse_config(LONG), out=tmp_path, progress=False)
    finally:
        timer.cancel()
    assert summary["interrupted"] is True and summary["interrupt_reason"] == "SIGTERM received"
    assert summary["wall_seconds"] < 5.0                 # stopped well before its 5-second end
    assert check_run(tmp_path).ok
    assert signal.getsignal(signal.SIGTERM) is not None   # the handler was put back
