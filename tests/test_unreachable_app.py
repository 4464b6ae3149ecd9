"""An app whose every usable node is gone: its key n_i u_i is 0 * inf at n_i = 0, and the
scheduler orders it last (``shares.served_key``) instead of crashing on a NaN key."""

from __future__ import annotations

import copy
import math

import pandas as pd
import pytest

from rayrm.rm.core.config import parse_config
from rayrm.rm.core.shares import served_key
from rayrm.rm.sim.engine import simulate
from rayrm.rm.runs.check import check_run
from samples import MIXED, job, node


def test_served_key_is_n_times_u_and_inf_for_an_app_no_node_holds():
    assert served_key(3, 0.25) == 0.75
    assert served_key(0, 0.25) == 0.0
    assert served_key(0, math.inf) == math.inf
    assert served_key(2, math.inf) == math.inf


@pytest.mark.parametrize("policy", ["cdrf", "tsf", "cmmf-cpu"])
def test_an_app_waits_while_its_only_node_is_gone(tmp_path, policy):
    # m1 (rack a) and m2 (rack b), 2 cpu each; m2 leaves at 1 and is back at 10.
    # "a" (4 tasks of 1 cpu, 30 s, rack a) runs 2 at 0 and 2 at 30 on m1: done at 60.
    # "b" (4 tasks of 1 cpu, 5 s, rack b) runs 2 on m2 at 0; they die with it at 1, and "b"
    # has no node it may use (u = inf) and none running (n = 0) beside "a" pending.  It
    # waits: 2 tasks start at 10 when m2 joins, end at 15, and the other 2 run 15-20.
    doc = {"name": "gone",
           "cluster": {"nodes": [node("m1", 2, 2048, rack="a"), node("m2", 2, 2048, rack="b")],
                       "events": [{"time": 1, "leave": "m2"},
                                  {"time": 10, "join": node("m2", 2, 2048, rack="b")}]},
           "workload": {"jobs": [job("a", 0, 4, 1, 512, 30, "rack == a"),
                                 job("b", 0, 4, 1, 512, 5, "rack == b")]},
           "run": {"seed": 1}}
    simulate(parse_config(doc), policy=policy, out=tmp_path, progress=False, fmt="csv")
    tasks = pd.read_csv(tmp_path / "tasks.csv", dtype={"app": str, "node": str, "status": str})
    done = tasks[tasks.status == "finished"]
    assert sorted(done[done.app == "b"].start) == [10, 10, 15, 15]
    assert sorted(done[done.app == "b"].finish) == [15, 15, 20, 20]
    assert sorted(done[done.app == "a"].start) == [0, 0, 30, 30]
    assert done.finish.max() == 60


def test_mixed_with_every_gpu_node_gone_for_a_while(tmp_path):
    # MIXED's "ml" may use only the gpu rack (c1, c2); c2 leaves at 45 there, and here c1
    # (with a3) leaves at 39 and both come back at 65: from 45 to 65 "ml" has no node
    # (u = inf) and, its tasks there lost, none running (n = 0) beside other apps pending.
    doc = copy.deepcopy(MIXED)
    events = doc["cluster"]["events"]
    for spec in (node("a3", 4, 8192, rack="a", gpu="no"), node("c1", 2, 16384, rack="c", gpu="yes")):
        events += [{"time": 39, "leave": spec["name"]}, {"time": 65, "join": spec}]
    events.sort(key=lambda e: e["time"])
    simulate(parse_config(doc), policy="cdrf", out=tmp_path, progress=False, fmt="csv")
    tasks = pd.read_csv(tmp_path / "tasks.csv", dtype={"app": str, "node": str, "status": str})
    ml = tasks[(tasks.app == "ml") & (tasks.status == "finished")]
    assert len(ml) == 12                                       # every task of "ml", once
    assert not ((ml.start > 45) & (ml.start < 65)).any()       # none while no gpu node is up
    assert check_run(tmp_path).tasks_missing == 0
