"""Partitions, slow and lossy links in short Ray replays (one local Ray session for the module).

The config is samples.SMALL: a1, a2 <cpu:2; memory_mb:2048; disk=ssd>, b1, b2 <cpu:1;
memory_mb:2048>; j1 = 20 tasks of <1 cpu, 512 MB> (about 5 s) from t=0, j2 = 10 tasks of
<0.5 cpu, 512 MB> (4 s, disk == ssd) from t=2; time scale 0.05.  A local Ray is one node,
so one NM host (nm-0, all four NMs) and one AM host (am-0, both AMs).  The expiries are
the 1-wall-second floor = 20 trace seconds, and ``host_silence: 1`` makes a host the RM
hears nothing from lost after one expiry, as in YARN.

Each test checks that the fault took effect the way the link rules say, and that the run
is still right: 30 tasks finished, none twice, ``rayrm check`` clean.
"""

from __future__ import annotations

import json

import pytest

ray = pytest.importorskip("ray")

from samples import SMALL, small_config  # noqa: E402

from rayrm.rm.runs.check import check_run  # noqa: E402
from rayrm.rm.runs.reader import RunDir  # noqa: E402
from rayrm.rm.runtime.driver import replay  # noqa: E402


def run_with(tmp_path, fault: str):
    cfg = small_config(run=dict(SMALL["run"], host_silence=1))
    summary = replay(cfg, out=tmp_path, faults=[fault], progress=False)
    result = check_run(tmp_path)
    assert result.ok, result.report()
    assert summary["tasks"]["finished"] == 30 and summary["tasks_finished_twice"] == 0
    return summary, RunDir(tmp_path)


def events(run: RunDir, kind: str):
    ev = run.events
    return ev[ev.kind == kind]


def test_an_nm_host_partitioned_past_the_expiry_is_lost_and_its_late_finishes_are_ignored(local_ray, tmp_path):
    # cut from t=4 to t=44, past the 20 s expiry: the tasks running at 4 (5 s each) finish
    # behind the partition, after the RM gave them up
    summary, run = run_with(tmp_path, "partition-nm-host:0@4+40")
    lost = events(run, "node_lost")
    assert sorted(lost.node) == ["a1", "a2", "b1", "b2"]
    assert ((lost.time > 20) & (lost.time < 44)).all() and lost.detail.str.startswith("no heartbeat").all()
    ignored = events(run, "ignored_finish")
    assert len(ignored) >= 1
    t = run.tasks
    for row in ignored.itertuples():              # its task ran again and finished once, later
        done = t[(t.app == row.app) & (t.task == int(row.task)) & (t.status == "finished")]
        assert len(done) == 1 and done.start.iloc[0] >= 44
    assert (t.status == "lost").sum() >= len(ignored)          # each ignored one was an attempt lost
    assert sorted(events(run, "node_join").query("time > 44").node) == ["a1", "a2", "b1", "b2"]
    assert summary["faults"]["link_lost"]["request"] >= 1
    # what it cost (faults.json): the four NMs down from their loss (20 < t < 44) to 44, of
    # a run of about 80 trace s, so availability about 1 - 20/80 = 0.75; the work lost is
    # the attempts that had run from t <= 4 until their NM was lost
    (cost,) = json.loads((tmp_path / "faults.json").read_text())["faults"]
    assert cost["kind"] == "partition-nm-host" and 15 < cost["detected"] < 40
    assert cost["work_lost"] > 0 and cost["lost_attempts"] == (t.status == "lost").sum()
    assert 0.5 < summary["faults"]["availability"] < 0.95


def test_an_am_host_partitioned_past_the_expiry_gets_new_attempts_and_its_old_calls_are_refused(
        local_ray, tmp_path):
    summary, run = run_with(tmp_path, "partition-am-host:0@4+40")
    expired = events(run, "am_expired")
    assert sorted(expired.app) == ["j1", "j2"] and ((expired.time > 20) & (expired.time < 44)).all()
    registered = events(run, "am_registered")
    assert sorted(registered.app) == ["j1", "j2"]
    assert registered.detail.str.startswith("attempt 2:").all() and (registered.time >= 44).all()
    fenced = events(run, "fenced")                # the old attempts' calls, once the link healed
    assert sorted(fenced.app) == ["j1", "j2"] and (fenced.time >= 44).all()


def test_a_slow_nm_host_whose_calls_take_longer_than_the_expiry_is_lost_and_comes_back(local_ray, tmp_path):
    # every call of nm-0 takes 1.5 wall s more from t=4 for 30 trace s (1.5 wall s): its
    # NMs' heartbeats arrive after the 1 s expiry
    summary, run = run_with(tmp_path, "slow-nm-host:0@4+30:1500")
    lost = events(run, "node_lost")
    assert set(lost.node) == {"a1", "a2", "b1", "b2"} and (lost.time > 20).all()
    assert set(events(run, "node_join").query("time > 20").node) == {"a1", "a2", "b1", "b2"}


def test_calls_and_answers_lost_on_a_lossy_link_are_retried_and_applied_once(local_ray, tmp_path):
    summary, run = run_with(tmp_path, "drop:0.3@0+30")
    lost = summary["faults"]["link_lost"]
    assert lost["request"] >= 1 and lost["answer"] >= 1
    assert events(run, "node_lost").empty and events(run, "am_expired").empty
