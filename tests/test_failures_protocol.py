"""Failures and fencing in the RM's protocol state, without Ray (rm/service/state.py, rm/service/store.py).

The cluster, app and driver are tests/harness.py's: n1 <cpu:2; memory_mb:2048>, n2
<cpu:1; memory_mb:1024>; app "a" has 4 tasks of <cpu:1; memory_mb:512>, so 3 run at
once (2 on n1, 1 on n2); each ``step`` is one second and a task runs ``DURATION`` = 2 s.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from harness import APP, NODES, SECRET, Harness, digest, kinds

from rayrm.rm.core.model import AppSpec, Resources
from rayrm.rm.service.calls import Call
from rayrm.rm.service.protocol import (COMPLETE, FENCED, FINISHED, LOST, NORMAL, RESYNC, RUNNING, SHUTDOWN,
                                      AllocateRequest, AppRegistration, ContainerLaunch, ContainerStatus,
                                      NodeHeartbeat, NodeRegistration, container_token, token_valid)
from rayrm.rm.service.records import RELEASED
from rayrm.rm.service.store import JournalError, StateStore, read_journal, replay_records

# ----- fencing ------------------------------------------------------------------

def test_an_am_cannot_release_another_apps_container():
    other = AppSpec("b", Resources.parse("cpu:1;memory_mb:512"), num_tasks=2)
    c = Harness(apps=(APP, other))
    c.step()
    theirs = next(cid for cid, (app, *_) in c.running.items() if app == "b")
    c.call("am", Call.ALLOCATE, [AllocateRequest("a", 1, 0, releases=(theirs,))])
    assert c.rm.containers.table[theirs].state != RELEASED          # untouched
    assert [e[5] for e in kinds(c.rm, "refused")] == [theirs]


def test_only_the_current_attempt_may_allocate_finish_or_register():
    c = Harness()
    c.step()
    assert c.call("am", Call.ALLOCATE, [AllocateRequest("a", 2, 1)])[0].action == FENCED
    assert c.call("am", Call.FINISH_APPS, [("a", 2)]) == [FENCED]
    reg = c.call("am", Call.REGISTER_APPS, [AppRegistration(APP, 3)])[0]
    assert not reg.accepted and reg.action == FENCED
    assert len(kinds(c.rm, "fenced")) == 3 and c.rm.records.refused == 3


def test_an_nm_host_may_not_speak_for_a_node_another_host_runs():
    c = Harness()
    c.step()
    beat = c.apply(Call.NODE_HEARTBEAT, "intruder", 1, [NodeHeartbeat("n1")])
    assert beat[0].action == FENCED
    reg = c.apply(Call.REGISTER_NODES, "intruder", 2, [NodeRegistration("n1", {"cpu": 2}, {}, "ray-b", 0)])
    assert reg == [FENCED] and c.rm.nodes.table["n1"].host == "nm"
    assert len(kinds(c.rm, "refused")) == 2


def test_an_nm_may_report_only_containers_it_runs():
    c = Harness()
    c.step()
    cid, (app, task, node, t0) = next(iter(c.running.items()))
    other = "n2" if node == "n1" else "n1"
    forged = ContainerStatus(cid, app, task, 0, other, COMPLETE, t0, t0, c.now, FINISHED)
    answers = c.call("nm", Call.NODE_HEARTBEAT, [NodeHeartbeat(other, (forged,))])
    assert c.rm.records.finished == 0 and answers[0].ack == (cid,)         # acknowledged, not applied
    assert kinds(c.rm, "refused")[0][6] == other


def test_container_tokens_bind_container_app_and_node():
    token = container_token(SECRET, 7, "a", "n1")
    # HMAC-SHA256 over "7␟a␟n1", the first 128 bits in hex, the same however often the key is used
    assert token == hmac.new(SECRET, b"7\x1fa\x1fn1", hashlib.sha256).hexdigest()[:32]
    assert container_token(SECRET, 7, "a", "n1") == token != container_token(SECRET + b"x", 7, "a", "n1")
    launch = ContainerLaunch(7, "a", 0, 0, "n1", 1.0, token=token)
    assert token_valid(SECRET, launch)
    for forged in (ContainerLaunch(7, "b", 0, 0, "n1", 1.0, token=token),      # another app
                   ContainerLaunch(7, "a", 0, 0, "n2", 1.0, token=token),      # another node
                   ContainerLaunch(8, "a", 0, 0, "n1", 1.0, token=token),      # another container
                   ContainerLaunch(7, "a", 0, 0, "n1", 1.0, token="")):
        assert not token_valid(SECRET, forged)
    c = Harness()
    c.call("nm", Call.NODE_HEARTBEAT, [NodeHeartbeat(n.name) for n in NODES])
    got = c.call("am", Call.ALLOCATE, [AllocateRequest("a", 1, 4)])[0].allocated
    assert len(got) == 3
    assert all(a.token == container_token(SECRET, a.container, "a", a.node) for a in got)
    c.call("nm", Call.NODE_HEARTBEAT, [NodeHeartbeat("n1", (), ((99, "a", "invalid container token"),))])
    assert kinds(c.rm, "refused")[-1][7] == "launch refused by the NM: invalid container token"


# ----- NodeManager loss -----------------------------------------------------------

def test_a_lost_node_that_comes_back_has_its_old_containers_killed():
    c = Harness()
    c.step()
    on_n2 = [cid for cid, (_, _, node, _) in c.running.items() if node == "n2"]
    c.step()                                                    # RUNNING reported
    c.apply(Call.LOSE_NODE, "n2", "test")
    assert c.rm.containers.table[on_n2[0]].state == COMPLETE
    # n2 was only partitioned: it registers again still running the old container
    zombie = ContainerStatus(on_n2[0], "a", c.running[on_n2[0]][1], 0, "n2", RUNNING, 1.0)
    c.call("nm", Call.REGISTER_NODES, [NodeRegistration("n2", {"cpu": 1, "memory_mb": 1024}, {}, "ray-a", 0,
                                                       (zombie,))])
    assert c.rm.nodes.table["n2"].cleanup == on_n2                  # killed at its next heartbeat
    assert kinds(c.rm, "node_lost") and kinds(c.rm, "node_join")[-1][6] == "n2"


def test_lost_tasks_are_asked_again_and_every_task_finishes_once():
    c = Harness()
    c.step()
    c.step()
    c.apply(Call.LOSE_NODE, "n1", "test")
    c.running = {k: v for k, v in c.running.items() if v[2] != "n1"}   # died with the node
    c.run(until=20)
    assert c.finished["a"] == {0, 1, 2, 3} and c.rm.records.duplicate_finishes == 0
    statuses = sorted(r[7] for r in c.rm.log.tasks.values())
    assert statuses.count("lost") == 2 and statuses.count("finished") == 4


# ----- ApplicationMaster failure -----------------------------------------------------

def test_a_failed_attempt_keeps_finished_tasks_and_running_containers():
    c = Harness()
    c.step()                                   # t=1: tasks 0-2 placed and started
    c.step()                                   # t=2: RUNNING reported
    c.step()                                   # t=3: 0-2 COMPLETE; task 3 placed and started
    c.step()                                   # t=4: task 3 RUNNING reported
    running = dict(c.rm.containers.table)
    assert sum(1 for x in running.values() if x.state == RUNNING) == 1
    # the AM dies; at t=20 the RM expires attempt 1 and launches attempt 2
    c.now = 20.0
    assert c.apply(Call.EXPIRE_APPS, 10.0) == ["a"]
    assert c.rm.pending_launches() == [("am", "a", 2)]
    answer = c.call("am", Call.REGISTER_APPS, [AppRegistration(APP, 2)])[0]
    # tasks 0-2 finished and are never run again; task 3's container is handed over
    assert answer.accepted and answer.attempt == 2
    assert answer.finished_tasks == (0, 1, 2) and [s.task for s in answer.running] == [3]
    assert [e[2] for e in c.rm.log.events[-3:]] == ["am_expired", "am_launch", "am_registered"]
    assert c.call("am", Call.ALLOCATE, [AllocateRequest("a", 1, 0)])[0].action == FENCED


def test_containers_acquired_but_never_started_are_released_when_the_attempt_fails():
    c = Harness()
    c.call("am", Call.ALLOCATE, [AllocateRequest("a", 1, 4)])
    c.call("nm", Call.NODE_HEARTBEAT, [NodeHeartbeat(n.name) for n in NODES])
    got = c.call("am", Call.ALLOCATE, [AllocateRequest("a", 1, 4)])[0].allocated   # ACQUIRED, never launched
    c.now = 20.0
    c.apply(Call.EXPIRE_APPS, 10.0)
    assert all(c.rm.containers.table[a.container].state == RELEASED for a in got)
    assert sorted(c.rm.nodes.table["n1"].cleanup + c.rm.nodes.table["n2"].cleanup) == sorted(a.container for a in got)
    assert c.rm.scheduler.cluster.containers == {}             # their resources are back


def test_after_max_attempts_the_app_fails_and_its_containers_are_killed():
    c = Harness(max_attempts=2)
    c.step()
    c.step()
    c.now = 20.0
    c.apply(Call.EXPIRE_APPS, 10.0)                               # attempt 1 fails -> attempt 2
    c.now = 40.0
    c.apply(Call.EXPIRE_APPS, 10.0)                               # attempt 2 never registered
    assert c.rm.apps.table["a"].done and c.rm.log.jobs["a"]["status"] == "failed"
    assert "2 of 2 attempts failed" in c.rm.log.jobs["a"]["reason"]
    assert c.rm.failed_apps() == [("am", "a")]
    assert c.call("am", Call.ALLOCATE, [AllocateRequest("a", 2, 0)])[0].action == SHUTDOWN
    assert sorted(c.rm.nodes.table["n1"].cleanup + c.rm.nodes.table["n2"].cleanup) == sorted(c.running)


# ----- ResourceManager restart -------------------------------------------------------

def test_the_rm_rebuilds_its_state_from_snapshot_and_journal(tmp_path):
    c = Harness(StateStore(tmp_path))
    c.run(until=3)
    c.store.snapshot(c.rm)                     # a snapshot in the middle, then more journal
    c.run(until=5)
    before = digest(c.rm)
    store = StateStore(tmp_path)
    state, records = store.load()
    assert records and replay_records(state, records) == len(records)
    assert digest(state) == before


def test_a_restored_rm_offers_nodes_as_the_live_one_did_with_many_apps_pending(tmp_path):
    """An offer walks the pending apps from the front; after ``WALK_STEPS`` misses, with
    ``VECTOR_FROM`` (48) apps or more pending, it asks the pending index (rm/core/pending.py)
    which apps fit.  The index is part of the snapshot, and the restored one must see the
    apps that arrived after it.  60 apps "a00".."a59" may use n1 only (disk != ssd) and
    come first in TSF's order (all at share 0; ties by id); "z" may use any node.  n2 (one
    <cpu:1> slot) is therefore offered through the index, and only z fits there: z runs on
    n2 at t = 1, 3 and 5 (tasks run 2 s), n1's two slots go to the a-apps at the same times."""
    from rayrm.rm.core.constraints import Constraint
    from rayrm.rm.core.scheduler import VECTOR_FROM
    demand = Resources.parse("cpu:1;memory_mb:512")
    apps = tuple(AppSpec(f"a{i:02d}", demand, num_tasks=4, constraint=Constraint.parse("disk != ssd"))
                 for i in range(60)) + (AppSpec("z", demand, num_tasks=10),)
    c = Harness(StateStore(tmp_path), apps=apps)       # snapshot 1: before any app arrived
    c.run(until=6)
    assert len(c.rm.scheduler._order) >= VECTOR_FROM
    placed = sorted((r.app == "z", r.node) for r in c.rm.containers.table.values())
    assert placed == [(False, "n1")] * 6 + [(True, "n2")] * 3
    state, records = StateStore(tmp_path).load()
    replay_records(state, records)
    assert digest(state) == digest(c.rm)


def test_a_call_retried_across_a_restart_gets_the_same_answer_and_allocates_nothing(tmp_path):
    c = Harness(StateStore(tmp_path))
    c.step()
    c.call("nm", Call.NODE_HEARTBEAT, [NodeHeartbeat(n.name) for n in NODES])
    first = c.call("am", Call.ALLOCATE, [AllocateRequest("a", 1, 4)])
    allocations = c.rm.records.allocations
    c.restart()
    again = c.call("am", Call.ALLOCATE, [AllocateRequest("a", 1, 4)], again=True)   # the answer was lost
    assert again == first and c.rm.records.allocations == allocations


def test_after_a_restart_nms_and_ams_resync_and_the_run_completes(tmp_path):
    c = Harness(StateStore(tmp_path))
    c.run(until=3)
    c.restart()
    assert kinds(c.rm, "rm_recovered")
    answers = c.call("nm", Call.NODE_HEARTBEAT, [NodeHeartbeat(n.name) for n in NODES])
    assert {r.action for r in answers} == {RESYNC}
    c.rid["nm"] -= 1                           # the host re-sends in step(): same request id
    c.run(until=20)
    assert [e[2] for e in c.rm.log.events if e[2].endswith("resync") or e[2] == "rm_resynced"] == \
        ["node_resync", "node_resync", "am_resync", "rm_resynced"]
    assert c.finished["a"] == {0, 1, 2, 3} and c.rm.records.duplicate_finishes == 0
    assert all(r[7] == "finished" for r in c.rm.log.tasks.values())


def test_a_container_its_nm_no_longer_reports_after_a_restart_is_lost(tmp_path):
    c = Harness(StateStore(tmp_path))
    c.step()
    c.step()
    c.restart()
    gone = next(cid for cid, v in c.running.items() if v[2] == "n2")
    del c.running[gone]                        # died while the RM was down, unreported
    c.step()                                   # RESYNC -> register without it
    assert c.rm.containers.table[gone].state == COMPLETE
    lost = [r for r in c.rm.log.tasks.values() if r[7] == LOST]
    assert len(lost) == 1 and lost[0][3] == "n2"


def test_a_torn_journal_tail_is_ignored(tmp_path):
    c = Harness(StateStore(tmp_path))
    c.run(until=3)
    path = c.store.journal_path(c.store.generation)
    whole = list(read_journal(path))
    with open(path, "ab") as fh:
        fh.write(b"\x40\x00\x00\x00\x00\x00\x00\x00partial")    # a record cut short by a crash
    assert len(list(read_journal(path))) == len(whole)


def test_a_restarted_rm_journals_past_a_torn_tail_so_a_second_restart_reads_it_all(tmp_path):
    c = Harness(StateStore(tmp_path))
    c.run(until=3)
    with open(c.store.journal_path(c.store.generation), "ab") as fh:
        fh.write(b"\x40\x00\x00\x00\x00\x00\x00\x00partial")    # the dead RM's last write, cut short
    c.restart()                  # the journal is cut after its last whole record, then appended to
    c.run(until=8)
    live = digest(c.rm)
    state, records = StateStore(tmp_path).load()
    replay_records(state, records)
    assert digest(state) == live


_REBUILD = """
import hashlib, sys
sys.path.insert(0, {tests!r})
from rayrm.rm.service.store import StateStore, replay_records
from harness import digest
state, records = StateStore({path!r}).load()
replay_records(state, records)
print(digest(state))
"""


def test_recovery_does_not_depend_on_the_process_hash_seed(tmp_path):
    """A restarted actor is another process, with another string hash seed."""
    c = Harness(StateStore(tmp_path))
    c.run(until=6)
    code = _REBUILD.format(tests=str(Path(__file__).parent), path=str(tmp_path))
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env=dict(os.environ, PYTHONHASHSEED=seed))
        assert out.stdout.strip() == digest(c.rm)


def test_the_state_pickles_without_deprecated_counters():
    pickle.dumps(Harness().rm)


def test_an_am_finishing_right_after_a_restart_is_not_sent_back_to_register(tmp_path):
    c = Harness(StateStore(tmp_path))
    c.run(until=8)                             # every task finished; the AM is about to finish
    assert c.finished["a"] == {0, 1, 2, 3}
    c.restart()                                # ... when the RM restarts: its finish is the first call
    assert c.call("am", Call.FINISH_APPS, [("a", 1)]) == [NORMAL]
    assert c.rm.log.jobs["a"]["status"] == "finished"
    assert not c.rm.resync.asked(("app", "a"))


def test_a_journal_record_naming_an_unknown_call_is_a_clear_error(tmp_path):
    c = Harness(StateStore(tmp_path))
    c.store.append(Call.FAULT, 1.0, ("driver", 1, "kill-nm:n1@1", "n1", ""))
    path = c.store.journal_path(c.store.generation)
    body = pickle.dumps(("grant_everything", 2.0, ()))              # a call this version lacks
    with open(path, "ab") as fh:
        fh.write(struct.pack("<II", len(body), zlib.crc32(body)) + body)
    state, records = StateStore(tmp_path).load()
    with pytest.raises(JournalError, match=r"journal record \d+: unknown call 'grant_everything'"):
        replay_records(state, records)


def test_a_background_snapshot_is_written_by_a_child_while_the_journal_goes_on(tmp_path):
    c = Harness(StateStore(tmp_path))
    c.run(until=3)
    assert c.store.snapshot(c.rm, background=True) == 0      # forked: the RM goes on at once
    c.run(until=5)                                            # these calls go to journal g+1
    # until the child has written the snapshot, recovery replays journal g and g+1
    assert c.store.journal_path(1).exists() and c.store.journal_path(2).exists()
    size, seconds = c.store.poll(wait=True)
    assert size == c.store.snapshot_path.stat().st_size > 0 and seconds >= 0
    assert not c.store.journal_path(1).exists()              # covered by snapshot 2: dropped
    before = digest(c.rm)
    state, records = StateStore(tmp_path).load()
    replay_records(state, records)
    assert digest(state) == before


def test_a_snapshot_is_due_after_so_many_journal_bytes_which_a_reload_counts_too(tmp_path, monkeypatch):
    # a restart replays the journal since the last snapshot: its bytes, not only its
    # records, bound that (1,000 NMs' heartbeats are ~5 KB a record)
    import rayrm.rm.service.store as store_module
    c = Harness(StateStore(tmp_path))
    c.run(until=3)
    written = c.store.journal_bytes()
    assert c.store.bytes == written > 0
    monkeypatch.setattr(store_module, "SNAPSHOT_BYTES", written + 1)
    assert not c.store.due()
    c.step()
    assert c.store.due() and c.store.bytes == c.store.journal_bytes() > written
    again = StateStore(tmp_path)
    again.load()
    assert again.bytes == c.store.bytes and again.due()
    c.store.snapshot(c.rm)
    assert c.store.bytes == 0 and not c.store.due()


# ----- losing an ApplicationMaster host ----------------------------------------------------

def test_losing_an_am_host_restarts_only_its_apps_keeping_their_work():
    other = AppSpec("b", Resources.parse("cpu:1;memory_mb:512"), num_tasks=2)
    c = Harness(max_attempts=2)
    c.call("am2", Call.REGISTER_APPS, [AppRegistration(other)])          # b lives on another AM host
    c.run(until=4)                             # a: tasks 0-2 finished at t=3, task 3 running
    kept = [x.container for x in c.rm.containers.live(app="a") if x.state == RUNNING]
    assert len(kept) == 1
    c.apply(Call.LOSE_AM_HOST, "driver", 1, "am", "AM host am died")
    a, b = c.rm.apps.table["a"], c.rm.apps.table["b"]
    assert (a.attempt, a.launching, a.uncounted) == (2, True, 1)
    assert (b.attempt, b.launching) == (1, False)                        # the other host's app: untouched
    assert c.rm.pending_launches() == [("am", "a", 2)]
    answer = c.call("am", Call.REGISTER_APPS, [AppRegistration(APP, 2)])[0]
    assert answer.accepted and answer.finished_tasks == (0, 1, 2)        # never run again
    assert [s.container for s in answer.running] == kept                 # handed over, not killed
    # losing the host again: attempt 3 although max_attempts is 2, since host losses do not count
    c.apply(Call.LOSE_AM_HOST, "driver", 2, "am", "AM host am died again")
    assert (a.attempt, a.done, a.uncounted) == (3, False, 2)


def test_an_am_host_lost_with_its_ray_node_registers_nothing_from_there_again():
    """The driver lost AM host "am" with Ray node "ray-x" (a link cut past Ray's health
    check).  App b was submitted during the cut: the RM never heard of it, so losing the
    host fails no attempt of b.  When the link heals, the old host's buffered registration
    of b arrives: fenced, since it comes from ray-x; b's attempt 1 registers from the host
    made again on ray-y and is the only one (two AMs of one attempt would split its
    finished tasks between them)."""
    late = AppSpec("b", Resources.parse("cpu:1;memory_mb:512"), num_tasks=2)
    c = Harness(max_attempts=2)
    c.apply(Call.LOSE_AM_HOST, "driver", 1, "am", "AM host am died (ActorUnschedulableError)", "ray-x")
    zombie = c.call("am", Call.REGISTER_APPS, [AppRegistration(late, 1, "ray-x")])[0]
    assert (zombie.accepted, zombie.action, zombie.attempt) == (False, FENCED, 0)
    assert "b" not in c.rm.apps.table
    fresh = c.call("am", Call.REGISTER_APPS, [AppRegistration(late, 1, "ray-y")])[0]
    assert fresh.accepted and c.rm.apps.table["b"].attempt == 1
    # a's attempt 1 failed with the host (uncounted); attempt 2 registers from ray-y
    assert c.call("am", Call.REGISTER_APPS, [AppRegistration(APP, 2, "ray-y")])[0].accepted
