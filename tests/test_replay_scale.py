"""The replay at paper scale, in its Ray-free parts: a bounded generator
tail, per-event work that touches only the event's own containers, and liveness
that does not read the RM's own slowness as silence."""

from __future__ import annotations

import numpy as np

from rayrm.rm.core.jobs import parse_durations
from rayrm.traces.generate import generate_google


def test_max_duration_truncates_the_pareto_tail_and_survives_the_job_table():
    capped = parse_durations("pareto:1.9:30:100")
    assert capped.max == 100 and parse_durations(capped.to_cell()) == capped
    # x_m = 30 × 0.9 / 1.9 = 14.2; P(x > 100) = (14.2 / 100)^1.9 ≈ 2.4%: of 10,000 draws
    # about 240 are cut to exactly 100, and none is longer
    drawn = capped.draw(10_000, np.random.default_rng(1))
    assert drawn.max() == 100 and 150 < int((drawn == 100).sum()) < 350
    _, specs, stats = generate_google(40, 30, 600, seed=2, max_duration=50)
    longest = max(float(s.task_durations(2).max()) for s in specs)
    assert longest <= 50 and stats["longest_task"] == longest and stats["max_duration"] == 50
    _, free, free_stats = generate_google(40, 30, 600, seed=2)
    assert free_stats["longest_task"] > 50 and "max_duration" not in free_stats


def test_the_plain_progress_line_has_trace_time_counts_and_lag_and_says_when_behind():
    from rayrm.rm.runtime.supervisor import progress_line
    p = {"time": 2650.0, "running": 812, "finished": 102000, "pending": 40, "lag": 0.013, "behind": False}
    assert progress_line("tsf", p, 180000) == (
        "rayrm replay [tsf] t=  2650.0s  running   812  finished 102000/180000  pending 40  lag 0.01s")
    assert progress_line("tsf", p | {"lag": 4.2, "behind": True}, 180000).endswith("lag 4.20s  BEHIND")


# ----- liveness under a stalled RM (rm/service/liveness.py), no Ray ---------------------

def test_a_stalled_rm_expires_nobody_and_real_silence_still_expires():
    from harness import Harness

    from rayrm.rm.service.liveness import Liveness
    from rayrm.rm.service.calls import Call
    from rayrm.rm.service.protocol import AllocateRequest, NodeHeartbeat

    h, live, expiry = Harness(), Liveness(), 10.0
    for t in range(1, 6):                          # the monitor ticks on time every second to t = 5
        h.step()
        live.tick(float(t), float(t))
    # the RM's loop blocks from t = 5 to t = 105: ten times the expiry; its next tick is 100 s late
    assert live.tick(105.0, 5.0) == 100.0
    h.now = 105.0
    assert h.rm.expire_nodes(105.0, expiry) == ["n1", "n2"]                   # the wall-clock rule...
    h2 = Harness()
    for _ in range(5):
        h2.step()
    h2.now = 105.0
    # ... but heard silence is (105 - 5) - 100 = 0 for every NM and for the AM
    assert live.silent_nodes(h2.rm, 105.0, expiry) == [] and live.silent_apps(h2.rm, 105.0, expiry) == []
    # the calls queued during the stall arrive now (sent at t = 6, when they were due); the
    # hosts' heartbeats carry their send time; n2 then really goes quiet
    h2.call("nm", Call.NODE_HEARTBEAT, [NodeHeartbeat("n1"), NodeHeartbeat("n2")], (), 6.0)
    h2.call("am", Call.ALLOCATE, [AllocateRequest("a", 1, 0)], 6.0)
    for k in range(24):                            # two heartbeats a second, t = 106 .. 117.5
        t = 106 + 0.5 * k
        live.tick(t, t)
        h2.now = t
        h2.call("nm", Call.NODE_HEARTBEAT, [NodeHeartbeat("n1")], (), t)
        h2.call("am", Call.ALLOCATE, [AllocateRequest("a", 1, 0)], t)
    # at t = 116 the NM host has sent 24 heartbeats (>= HOST_CALLS = 20) and 116 - 6 = 110 s
    # without n2, and n2 was heard at 105 (its queued heartbeat): 116 - 105 = 11 s > 10 s of
    # silence; at 115 it was only 10
    assert live.silent_nodes(h2.rm, 115.0, expiry) == []
    assert live.silent_nodes(h2.rm, 116.0, expiry) == ["n2"] and live.silent_apps(h2.rm, 116.0, expiry) == []
    assert h2.apply(Call.EXPIRE_NODES, expiry, ["n2"]) == ["n2"]
    assert h2.rm.apps.table["a"].attempt == 1 and not h2.rm.apps.table["a"].done         # no app failed


class _NoScan(dict):
    """The RM's container table, refusing to be scanned and counting lookups."""

    reads = 0

    def __getitem__(self, key):
        _NoScan.reads += 1
        return dict.__getitem__(self, key)

    def values(self):
        raise AssertionError("scanned every container in the cluster")

    items = __iter__ = values


def test_failing_an_app_or_losing_a_node_touches_only_their_own_containers():
    from harness import APP, Harness

    from rayrm.rm.core.model import AppSpec, Resources
    from rayrm.rm.service.calls import Call
    from rayrm.rm.service.protocol import RUNNING

    other = AppSpec("b", Resources.parse("cpu:1;memory_mb:512"), num_tasks=2)
    h = Harness(apps=(APP, other))
    h.step()
    h.step()                                       # 3 containers RUNNING: 2 on n1, 1 on n2
    table = h.rm.containers.table
    assert sum(c.state == RUNNING for c in table.values()) == 3
    mine = sorted(h.rm.containers.by_app.get("a", ()))
    on_n2 = sorted(h.rm.containers.by_node["n2"])
    h.rm.containers.table = _NoScan(table)
    _NoScan.reads = 0
    h.now = 30.0
    h.apply(Call.EXPIRE_APPS, 10.0, ["a"])         # attempt 1 of a fails: only a's containers read
    assert _NoScan.reads == len(mine)
    _NoScan.reads = 0
    h.apply(Call.LOSE_NODE, "n2", "test")          # only n2's
    assert _NoScan.reads == len(on_n2) >= 1
    assert h.rm.running == sum(c.state == RUNNING for c in table.values())


def test_losing_and_registering_a_hosts_nms_refreshes_every_app_once(monkeypatch):
    # An NM host of 1,000 NMs lost (or registering again) must not recompute every app's
    # eligibility and h once per NM: the scheduler gets the nodes in one batch.  Here the
    # host "nm" runs n1 and n2; losing it and registering both again refresh once each, and
    # the outcome is the one of losing n1, then n2, alone.
    from harness import APP, Harness, registration

    from rayrm.rm.core.cluster import ClusterState
    from rayrm.rm.core.model import AppSpec, Resources
    from rayrm.rm.service.calls import Call
    from rayrm.rm.service.protocol import RUNNING

    other = AppSpec("b", Resources.parse("cpu:1;memory_mb:512"), num_tasks=2)
    one_by_one, batched = Harness(apps=(APP, other)), Harness(apps=(APP, other))
    for h in (one_by_one, batched):
        h.step()
        h.step()                                   # 3 containers RUNNING: 2 on n1, 1 on n2
    refreshes = []
    real = ClusterState._refresh
    monkeypatch.setattr(ClusterState, "_refresh", lambda self: (refreshes.append(1), real(self)))
    lost = [c for n in ("n1", "n2") for c in one_by_one.apply(Call.LOSE_NODE, n, "NM host died")]
    assert len(refreshes) == 2 and len(lost) == 3
    refreshes.clear()
    assert batched.call("driver", Call.LOSE_HOST, "nm", "NM host died") == ["n1", "n2"]
    assert len(refreshes) == 1
    for h in (one_by_one, batched):
        assert h.rm.running == 0 and not h.rm.containers.by_node
        assert {a: [(c.task, c.exit) for c in r.completed] for a, r in h.rm.apps.table.items()} == \
            {a: [(c.task, c.exit) for c in r.completed] for a, r in one_by_one.rm.apps.table.items()}
    refreshes.clear()
    assert batched.call("nm", Call.REGISTER_NODES, [registration(n) for n in batched.nodes]) == ["normal"] * 2
    assert len(refreshes) == 1
    assert sum(n.alive for n in batched.rm.scheduler.cluster.nodes) == 2
    assert not any(c.state == RUNNING for c in batched.rm.containers.table.values())


def test_replaying_the_journal_never_scans_every_container(tmp_path):
    # A restart replays each journaled call as it ran (rm/service/store.py); no call may
    # read the whole container table, or a restart at 1,000 nodes would cost records x
    # containers.  The run: app a's 4 tasks, a lost node, an app that fails, to the end.
    from harness import Harness

    from rayrm.rm.service.calls import Call
    from rayrm.rm.service.store import StateStore, replay_records

    h = Harness(StateStore(tmp_path))
    h.run(until=2)
    h.apply(Call.LOSE_NODE, "n2", "test")
    h.run(until=6)
    h.apply(Call.EXPIRE_APPS, 10.0, ["a"])
    h.run(until=9)
    state, records = StateStore(tmp_path).load()
    assert len(records) >= 10
    state.containers.table = _NoScan(state.containers.table)
    assert replay_records(state, records) == len(records)      # _NoScan raises on a scan
    assert dict(state.containers.table) == dict(h.rm.containers.table)


def test_the_am_expiry_scan_sees_apps_registered_since_and_drops_those_done():
    from harness import Harness

    from rayrm.rm.core.model import AppSpec, Resources
    from rayrm.rm.service.liveness import HOST_FACTOR, Liveness
    from rayrm.rm.service.calls import Call
    from rayrm.rm.service.protocol import AppRegistration

    h, live, expiry = Harness(), Liveness(), 10.0    # app a's AM host "am" was last heard at t = 0
    # a host silent for more than HOST_FACTOR x expiry = 300 s leaves its AMs silent: a at 405
    assert HOST_FACTOR * expiry == 300.0
    h.now = 400.0
    h.call("am2", Call.REGISTER_APPS, [AppRegistration(AppSpec("b", Resources.parse("cpu:1;memory_mb:512"), 1))])
    assert live.silent_apps(h.rm, 405.0, expiry) == ["a"]           # b: heard 5 s ago
    # b, registered after the first scan, is read by the next: its host silent 800 - 400 = 400 s
    assert live.silent_apps(h.rm, 800.0, expiry) == ["a", "b"]
    h.now = 800.0
    assert h.call("am", Call.FINISH_APPS, [("a", 1)]) == ["normal"]  # a ends (done for good)
    assert live.silent_apps(h.rm, 801.0, expiry) == ["b"]
