"""The compiled core against the Python reference (rayrm.rm.core.native).

The event queue: the same pops, in the order (t, priority, push order), as a sort of the
pushed events says.  The water-filling preemption's rules solve at each evaluation: the same
floats, and random preempting runs byte for byte the same.  The simulator: random clusters, constraints, demands, arrivals,
node joins and leaves, faults and launch jitter, simulated under each core — every file of the run directory but
the summary's wall time byte for byte the same, so every decision was.
"""

from __future__ import annotations

import json
import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rayrm.rm.core.config import parse_config
from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.model import AppSpec, NodeSpec, Resources
from rayrm.rm.core.pending import PendingIndex
from rayrm.rm.core.policies.builtin import BUILTIN
from rayrm.rm.core.queues.fairshare import fair_shares
from rayrm.rm.core.queues.scheduler import TreeScheduler
from rayrm.rm.core.queues.tree import parse_queues
from rayrm.rm.core.scheduler import OnlineScheduler
from rayrm.rm.core.errors import InputError
from rayrm.rm.core import native
from rayrm.rm.sim.engine import simulate
from rayrm.rm.sim.events import EventHeap, event_heap

BUILT = native.native_built()
needs_native = pytest.mark.skipif(not BUILT, reason="the compiled core is not built")


@needs_native
def test_events_pop_by_time_then_priority_then_push_order():
    # pushed: a (5, 4), b (5, 0), c (3, 2), d (5, 0), e (3, 2)
    # c and e tie at t=3, priority 2: push order, c first; at t=5 priority 0 (b, d) before 4 (a)
    for heap in (EventHeap(), event_heap("native")):
        for t, p, x in [(5.0, 4, "a"), (5.0, 0, "b"), (3.0, 2, "c"), (5.0, 0, "d"), (3.0, 2, "e")]:
            heap.push(t, p, x)
        assert heap.first_time() == 3.0 and len(heap) == 5
        assert [heap.pop()[2] for _ in range(5)] == ["c", "e", "b", "d", "a"]
        assert heap.first_time() == float("inf") and not heap
        with pytest.raises(IndexError):
            heap.pop()


@needs_native
@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.tuples(st.sampled_from([0.0, 1.0, 1.5, 2.0, 7.25]), st.integers(0, 4)),
                          st.none()), max_size=300))
def test_event_heaps_pop_the_same_sequence(ops):
    """ops: a (t, priority) is a push (its payload the push's number), None a pop when not empty."""
    py, nat = EventHeap(), event_heap("native")
    pushed = []
    for k, op in enumerate(ops):
        if op is None:
            if py:
                got = py.pop()
                assert nat.pop() == got
                # the least pushed event still in, by (t, priority, push order)
                least = min(pushed, key=lambda e: (e[0], e[1], e[2]))
                pushed.remove(least)
                assert got == (least[0], least[1], least[2])
        else:
            py.push(op[0], op[1], k)
            nat.push(op[0], op[1], k)
            pushed.append((op[0], op[1], k))
        assert len(py) == len(nat) and py.first_time() == nat.first_time()


@needs_native
def test_native_heap_holds_its_payloads():
    heap = event_heap("native")
    for i in range(5000):           # grows past its first allocation (1,024 events)
        heap.push(float(i % 7), 0, [i])
    popped = [heap.pop()[2][0] for _ in range(2500)]
    assert popped[:3] == [0, 7, 14]     # t=0 first, in push order: i = 0, 7, 14, ...
    del heap                            # 2,500 payloads still inside are released here


def test_core_selection(monkeypatch):
    assert native.core_name({"RAYRM_CORE": "python"}) == "python"
    assert native.core_name({}) == ("native" if BUILT else "python")
    with pytest.raises(InputError, match="RAYRM_CORE must be"):
        native.core_name({"RAYRM_CORE": "rust"})
    with pytest.raises(ValueError, match="not a module of the native core"):
        native.native_module("_nosuch")
    monkeypatch.setattr(native, "native_built", lambda: False)
    with pytest.raises(InputError, match="compiled core is not built"):
        native.core_name({"RAYRM_CORE": "native"})
    assert native.core_name({}) == "python"


def random_config(rng: random.Random) -> dict:
    """A cluster of 2-4 node shapes on racks, 3-9 jobs with constraints, demands and arrivals,
    nodes leaving (for a while or for good) and joining."""
    groups, names = [], []
    for g in range(rng.randint(2, 4)):
        count = rng.randint(1, 4)
        groups.append({"name": f"g{g}n{{i}}", "count": count,
                       "capacity": {"cpu": rng.choice([2, 4, 8]), "memory_mb": rng.choice([2048, 4096, 8192])},
                       "attributes": {"rack": f"r{g % 2}", "gpu": rng.choice(["yes", "no"])}})
        names += [f"g{g}n{i}" for i in range(1, count + 1)]
    events = []
    for k in range(rng.randint(0, 4)):
        t = rng.randint(1, 40)
        if rng.random() < 0.5:
            events.append({"time": t, "leave": rng.choice(names)})
        else:
            events.append({"time": t, "join": {"name": f"x{k}", "capacity": {"cpu": 4, "memory_mb": 4096},
                                               "attributes": {"rack": "r1", "gpu": "no"}}})
    events.sort(key=lambda e: e["time"])
    constraints = ["", "rack == r0", "gpu == yes", "rack in (r0, r1)", "gpu != yes"]
    jobs = [{"id": f"j{i}", "submit": rng.choice([0, 0, 3, 5, 12, 30]), "tasks": rng.randint(1, 25),
             "demand": {"cpu": rng.choice([0.5, 1, 2]), "memory_mb": rng.choice([512, 1024, 3072])},
             "duration": rng.choice([4, {"mean": 6, "jitter": 0.3}, {"dist": "pareto", "alpha": 1.9, "mean": 5}]),
             "constraint": rng.choice(constraints)} for i in range(rng.randint(3, 9))]
    doc = {"name": "equiv", "cluster": {"nodes": groups, "events": events}, "workload": {"jobs": jobs},
           "run": {"seed": rng.randint(0, 99)}}
    if rng.random() < 0.4:          # faults: their steps are events of priority FAULT on the same heap
        doc["faults"] = [f"kill-nm:{rng.choice(names)}@{rng.randint(1, 30)}",
                         f"kill-am:{rng.choice(jobs)['id']}@{rng.randint(1, 30)}", f"kill-rm@{rng.randint(5, 35)}"]
        doc["run"] |= {"nm_expiry": 4, "am_expiry": 3, "rm_restart": 2}
    return doc


def run_files(doc, policy, core, out, monkeypatch, jitter=0.0, until=None) -> dict:
    monkeypatch.setenv("RAYRM_CORE", core)
    simulate(parse_config(json.loads(json.dumps(doc))), policy=policy, out=out, progress=False,
             launch_jitter=jitter, until=until)
    files = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()}
    summary = json.loads(files.pop("summary.json"))
    summary.pop("wall_seconds", None)
    return files | {"summary.json": json.dumps(summary, sort_keys=True).encode()}


@needs_native
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**32 - 1), st.sampled_from(["tsf", "drf", "cdrf", "fifo", "slots", "drfh-bf", "pm-drf"]))
def test_both_cores_make_the_same_run(tmp_path_factory, monkeypatch, seed, policy):
    rng = random.Random(seed)
    doc = random_config(rng)
    jitter = rng.choice([0.0, 0.0, 0.8])     # jittered starts: completions at unround times
    base = tmp_path_factory.mktemp("equiv")
    py = run_files(doc, policy, "python", base / "python", monkeypatch, jitter)
    nat = run_files(doc, policy, "native", base / "native", monkeypatch, jitter)
    assert py.keys() == nat.keys() and "tasks.csv" in py
    for name in py:
        assert py[name] == nat[name], name


@needs_native
@pytest.mark.parametrize("seed", range(8))
def test_both_cores_stop_at_until_the_same(tmp_path, monkeypatch, seed):
    """``until`` stops the run before the first instant after it; the compiled loop
    (``_simloop.loop``, taken under the native core only) stops where the reference does."""
    rng = random.Random(1000 + seed)
    doc, until = random_config(rng), rng.choice([0, 3, 7.5])
    loops = []
    steps = native.compiled("_simloop")
    loop = steps.loop
    monkeypatch.setattr(steps, "loop", lambda *a: loops.append(a[2]) or loop(*a))
    py = run_files(doc, "tsf", "python", tmp_path / "python", monkeypatch, until=until)
    nat = run_files(doc, "tsf", "native", tmp_path / "native", monkeypatch, until=until)
    assert loops == [until]             # once, for the native run, with its bound
    # each of these runs outlasts 7.5 s (jobs of up to 25 tasks of 4-6 s on a few nodes): cut short
    assert json.loads(nat["summary.json"])["interrupt_reason"] == f"--until {until:g}"
    assert py.keys() == nat.keys() and "tasks.csv" in py
    for name in py:
        assert py[name] == nat[name], name


# ----- the scheduler, step by step ---------------------------------------------------

R, C = Resources.parse, Constraint.parse
FLAT_POLICIES = [p for p in BUILTIN if not p.startswith("yarn-")]


def random_nodes(rng: random.Random, first: int, count: int) -> list[NodeSpec]:
    out = []
    for i in range(first, first + count):
        cap = R(f"cpu:{rng.choice([1, 2, 4, 8])};mem:{rng.choice([2, 4, 8, 16])}")
        out.append(NodeSpec(f"n{i}", cap, {"rack": rng.choice("ab"), "cores": cap["cpu"]}))
    return out


def random_app(rng: random.Random, k: int, queues: tuple = ()) -> AppSpec:
    constraints = ["", "rack == a", "rack != a", "cores >= 4", "rack in (a, b) and cores < 8"]
    return AppSpec(f"j{k}", R(f"cpu:{rng.choice([0.5, 1, 2])};mem:{rng.choice([0.5, 1, 3])}"),
                   rng.randint(1, 30), weight=rng.choice([1, 1, 2]), submit=float(k // 2),
                   constraint=C(rng.choice(constraints)), **({"queue": rng.choice(queues)} if queues else {}))


def scheduler_state(s) -> tuple:
    """Everything a decision leaves behind: the order, keys, counts and free vectors."""
    return ([(e[0], e[1], e[2]) for e in s._order],
            sorted((a.app_id, a.running, a.pending, a.key) for a in s.cluster.apps.values()),
            [(n.name, n.alive, tuple(n.free)) for n in s.cluster.nodes])


def drive_both(rng: random.Random, make, queues: tuple = (), arrivals: float = 0.15,
               pair: tuple = ("python", "native"), burst: int = 1) -> int:
    """Random events (arrivals, more asks, cancels, releases, joins, leaves, finished apps)
    applied to two schedulers, ``make(pair[0])`` and ``make(pair[1])`` (by default a
    Python-core and a native-core one), 1 to ``burst`` of them before each ``schedule()``;
    after every one both placed the same containers and hold the same state.  Returns how
    many were placed."""
    cores = (make(pair[0]), make(pair[1]))
    if pair == ("python", "native"):
        assert [s._native for s in cores] == [False, True]      # each core walks its own offers
    running: list[int] = []
    k, joined, placed = 0, 100, 0

    def event():
        nonlocal k, joined, running
        op = rng.random()
        live = list(cores[0].cluster.apps)
        if op < arrivals or not live:
            spec = random_app(rng, k, queues)
            k += 1
            answers = [s.submit(spec) for s in cores]
            assert answers[0][1] == answers[1][1]
        elif op < arrivals + 0.1:
            app_id, n = rng.choice(live), rng.randint(1, 5)
            for s in cores:
                s.ask(app_id, n)
        elif op < arrivals + 0.15:
            app_id, n = rng.choice(live), rng.randint(1, 5)
            for s in cores:
                s.cancel(app_id, n)
        elif op < arrivals + 0.18:
            app_id = rng.choice(live)
            gone = [[c.container_id for c in s.finish_app(app_id)] for s in cores]
            assert gone[0] == gone[1]
            running = [c for c in running if c not in gone[0]]
        elif op < arrivals + 0.21:
            specs = random_nodes(rng, joined, rng.randint(1, 2))
            joined += len(specs)
            for s in cores:
                s.add_nodes(specs)
        elif op < arrivals + 0.24:
            alive = [n.name for n in cores[0].cluster.nodes if n.alive]
            if len(alive) > 1:
                name, departed = rng.choice(alive), rng.random() < 0.5
                lost = [[c.container_id for c in s.remove_nodes([name], departed)] for s in cores]
                assert lost[0] == lost[1]
                running = [c for c in running if c not in lost[0]]
        elif running:
            cid = running.pop(rng.randrange(len(running)))
            assert cores[0].release(cid) == cores[1].release(cid)

    for step in range(250):
        for _ in range(rng.randint(1, burst) if burst > 1 else 1):
            event()
        got = [s.schedule() for s in cores]
        assert got[0] == got[1], step
        assert scheduler_state(cores[0]) == scheduler_state(cores[1]), step
        running += [c.container_id for c in got[0]]
        placed += len(got[0])
    return placed


def make_under(monkeypatch, build):
    def make(core):
        monkeypatch.setenv("RAYRM_CORE", core)
        return build()
    return make


@needs_native
@pytest.mark.parametrize("policy", FLAT_POLICIES)
@pytest.mark.parametrize("seed", range(6))
def test_both_cores_schedule_the_same_step_by_step(monkeypatch, policy, seed):
    rng = random.Random(seed)
    nodes = random_nodes(rng, 0, rng.randint(3, 12))
    placed = drive_both(rng, make_under(monkeypatch, lambda: OnlineScheduler(policy, ("cpu", "mem"), nodes)))
    assert placed > 20, "the run places enough tasks to compare something"


@needs_native
@pytest.mark.parametrize("policy", ["tsf", "drf", "cdrf", "fifo"])
@pytest.mark.parametrize("seed", range(4))
def test_both_cores_agree_when_the_vector_index_names_the_app(monkeypatch, policy, seed):
    """More than VECTOR_FROM (48) apps pending, most of them unable to use most nodes: the
    offer walk gives up after WALK_STEPS misses and asks the index (``_first_fitting``)."""
    rng = random.Random(200 + seed)
    nodes = random_nodes(rng, 0, 6)
    asked = []

    def build():
        s = OnlineScheduler(policy, ("cpu", "mem"), nodes)
        first = s._first_fitting
        s._first_fitting = lambda m, free: asked.append(s._native) or first(m, free)
        return s

    assert drive_both(rng, make_under(monkeypatch, build), arrivals=0.5) > 20
    assert asked.count(True) == asked.count(False) > 0


@needs_native
@pytest.mark.parametrize("policy", ["tsf", "drf", "yarn-fair", "yarn-capacity"])
@pytest.mark.parametrize("seed", range(4))
def test_both_cores_schedule_a_queue_tree_the_same(monkeypatch, policy, seed):
    rng = random.Random(100 + seed)
    nodes = random_nodes(rng, 0, rng.randint(4, 12))
    dims = ("cpu", "mem")
    total = {d: sum(n.capacity[d] for n in nodes) for d in dims}
    queues = [{"name": "a", "weight": 2}, {"name": "b", "weight": 1}]
    make = make_under(monkeypatch, lambda: TreeScheduler(policy, dims, nodes, parse_queues(queues, dims, total)))
    assert drive_both(rng, make, ("a", "b")) > 20


@needs_native
def test_the_compiled_keeps_answers_as_the_victim_search_does():
    """``_victims.keeps`` against the expression ``victims._sources`` reads under the Python
    core, on random usages, demands and floors — a floor often exactly a queue's share after
    the kill, where the comparison's equality decides."""
    from rayrm.rm.core.queues.treeview import _measure
    keeps = native.compiled("_victims").keeps
    rng = random.Random(11)
    for _ in range(5000):
        k = rng.choice([1, 2, 3])
        inverse = [rng.choice([0.0, 1 / 8, 1 / 3, 1 / 32768]) for _ in range(k)]
        frac = _measure(tuple(inverse))
        d = tuple(rng.choice([0.5, 1, 2, 1024.0, 3.3]) for _ in range(k))
        held = []
        for _ in range(rng.randint(1, 3)):
            u = [rng.choice([0.0, 1.0, 2.5, 8, 4096.0]) + rng.random() for _ in range(k)]
            after = frac([x - y for x, y in zip(u, d)])
            floor = rng.choice([after, after - 1e-9, after + 1e-9, rng.uniform(-1, 1)])
            held.append((u, floor))
        assert keeps(held, d, inverse) == all(frac([x - y for x, y in zip(u, d)]) >= f for u, f in held)


@pytest.mark.parametrize("core", ["python", pytest.param("native", marks=needs_native)])
@pytest.mark.parametrize("seed", range(4))
def test_a_tree_offer_ended_by_its_proof_places_what_the_full_offer_does(monkeypatch, core, seed):
    """A node back under its proof with no app asked for since fitting: the tree's offer
    stops without asking the tree again (``TreeScheduler._offer_tree``), and places exactly
    what an offer that asks until nothing is chosen places."""
    monkeypatch.setenv("RAYRM_CORE", core)
    rng = random.Random(300 + seed)
    nodes = random_nodes(rng, 0, rng.randint(4, 12))
    dims = ("cpu", "mem")
    total = {d: sum(n.capacity[d] for n in nodes) for d in dims}
    queues = [{"name": "a", "weight": 2}, {"name": "b", "weight": 1}]
    asks = {"proof": 0, "plain": 0}

    def make(kind):
        s = TreeScheduler("tsf", dims, nodes, parse_queues(queues, dims, total))
        assert s._tree_proofs           # no cap in this tree
        s._tree_proofs = kind == "proof"
        index = s._index
        fits = index.fits_mask
        index.fits_mask = lambda m, free: asks.__setitem__(kind, asks[kind] + 1) or fits(m, free)
        return s

    # several events a round: releases (proofs) and asks (apps asked for since) meet
    assert drive_both(rng, make, ("a", "b"), pair=("plain", "proof"), burst=6) > 20
    assert asks["proof"] < asks["plain"], asks      # the proof spared some of the tree's questions


@needs_native
@pytest.mark.parametrize("seed", range(5))
def test_both_pending_indexes_hold_the_same_bits(seed):
    """Apps arrive (some on every node), change eligibility as nodes join, leave and are
    compacted away: the compiled bit writes leave the same rows, and the compiled mask gives
    the same answers."""
    rng = random.Random(seed)
    n_nodes = rng.randint(5, 40)
    indexes = [PendingIndex(2, n_nodes, native) for native in (False, True)]
    live: list[str] = []

    def eligible(n):
        row = bytes(rng.random() < 0.7 for _ in range(n))
        return bytearray(row) if rng.random() < 0.3 else row

    for k in range(4000):              # past 1,024 dead slots: compactions too
        op = rng.random()
        if op < 0.45 or not live:
            app_id, demand, elig = f"a{k}", (rng.choice([0.5, 1.0, 2.0]), rng.choice([1.0, 3.0])), eligible(n_nodes)
            for ix in indexes:
                ix.add(app_id, demand, elig)
                ix.set_pending(app_id, True)
            live.append(app_id)
        elif op < 0.55:
            app_id, elig = rng.choice(live), eligible(n_nodes + (rng.random() < 0.2))
            n_nodes = max(n_nodes, len(elig))
            for ix in indexes:
                ix.set_eligible(app_id, elig)
        else:
            app_id = live.pop(rng.randrange(len(live)))
            for ix in indexes:
                ix.remove(app_id)
        m, free = rng.randrange(n_nodes), [rng.choice([0.5, 1.0, 2.0, 4.0]), rng.choice([1.0, 2.0, 4.0])]
        # the compiled mask (asked first: the Python one refreshes a stale row)
        assert indexes[1].fits_mask(m, free) == indexes[0]._mask(m, free), k
        assert sorted(indexes[0].fitting(m, free)) == sorted(indexes[1].fitting(m, free)), k
    assert indexes[0].generation == indexes[1].generation > 0
    assert (indexes[0]._bits == indexes[1]._bits).all()
    assert [(d.values, d.prefix) for d in indexes[0]._dims] == [(d.values, d.prefix) for d in indexes[1]._dims]


@needs_native
@pytest.mark.parametrize("seed", range(3))
def test_a_nodes_candidates_refitted_after_a_placement_are_the_indexs(seed):
    """The compiled tree offer re-tests a node's last candidates after a placement on it
    (``_tree.refit``): for any smaller free vector, with the placed app's last task gone or
    not, they are what the index answers anew."""
    refit = native.compiled("_tree").refit_of
    rng = random.Random(300 + seed)
    n_nodes = 8
    index = PendingIndex(2, n_nodes, True)
    values = ([0.5, 1.0, 2.0, 4.0], [1.0, 2.0, 3.0, 8.0])
    for k in range(300):
        app_id = f"a{k}"
        index.add(app_id, tuple(rng.choice(v) for v in values), bytes(rng.random() < 0.6 for _ in range(n_nodes)))
        index.set_pending(app_id, True)
    checked = 0
    for _ in range(500):
        m = rng.randrange(n_nodes)
        before = [rng.choice([2.0, 4.0, 8.0]), rng.choice([4.0, 8.0, 16.0])]
        fit = index.fits_mask(m, before)
        if not fit:
            continue
        placed = index.item(fit & -fit)             # the lowest candidate took one task
        after = [f - d for f, d in zip(before, index._demand[index._slot[placed]])]
        last = rng.random() < 0.5                   # ... its last: it leaves the pending set
        if last:
            index.set_pending(placed, False)
        assert refit(index, fit, after) == index.fits_mask(m, after)
        checked += 1
        if last:
            index.set_pending(placed, True)
    assert checked > 300


# ----- preemption's water-filling ---------------------------------------------------

@needs_native
def test_the_compiled_water_filling_gives_the_same_floats():
    rng = random.Random(7)
    solve = native.compiled("_fairshare").fair_shares
    for _ in range(20000):
        n = rng.randint(1, 7)
        weights = [rng.choice([0, 0.5, 1, 2, 3, rng.random() * 5]) for _ in range(n)]
        hi = [rng.choice([0.0, 1.0, 0.3 * rng.random(), rng.random(), math.inf]) for _ in range(n)]
        lo = [min(rng.choice([0.0, 0.0, 0.4 * rng.random()]), h) for h in hi]
        total = rng.choice([1.0, 0.75, 0.25, rng.random()])
        assert solve(weights, lo, hi, total) == fair_shares(weights, lo, hi, total)
    # a worked case: weights 3 and 1 share 1; the second is capped at its demand 0.1, so the
    # first takes the rest, 0.9 (R = 0.3 would give it 0.9 = 3R; 0.1 + 0.9 = 1)
    assert solve([3, 1], [0.0, 0.0], [1.0, 0.1], 1.0) == pytest.approx([0.9, 0.1])


def preemption_config(rng: random.Random) -> dict:
    """Two to four leaves (one level or under a parent), jobs arriving into them, preemption
    on with short timeouts: starvation, victims and kills happen within the run."""
    nodes = [{"name": "n{i}", "count": rng.randint(2, 6),
              "capacity": {"cpu": rng.choice([4, 8]), "memory_mb": rng.choice([4096, 8192])}}]
    leaves = ["a", "b"] + (["p.c", "p.d"] if rng.random() < 0.5 else [])
    queues = [{"name": "a", "weight": rng.choice([1, 2])}, {"name": "b"}]
    if len(leaves) > 2:
        queues.append({"name": "p", "children": [{"name": "c"}, {"name": "d", "weight": 2}]})
    jobs = [{"id": f"j{i}", "queue": rng.choice(leaves), "submit": rng.choice([0, 0, 5, 20, 40]),
             "tasks": rng.randint(2, 30), "duration": rng.choice([30, 60, {"mean": 50, "jitter": 0.3}]),
             "demand": {"cpu": rng.choice([0.5, 1, 2]), "memory_mb": rng.choice([512, 1024, 3072])}}
            for i in range(rng.randint(3, 8))]
    return {"name": "equiv-preempt", "cluster": {"nodes": nodes}, "queues": queues, "workload": {"jobs": jobs},
            "preemption": {"enabled": True, "fair_share_timeout": rng.choice([5, 10]),
                           "fair_share_threshold": rng.choice([0.5, 0.9]), "grace": rng.choice([3, 8])},
            "run": {"seed": rng.randint(0, 99)}}


@needs_native
@pytest.mark.parametrize("seed", range(12))
def test_both_cores_preempt_the_same(tmp_path, monkeypatch, seed):
    doc = preemption_config(random.Random(seed))
    py = run_files(doc, "tsf", "python", tmp_path / "python", monkeypatch)
    nat = run_files(doc, "tsf", "native", tmp_path / "native", monkeypatch)
    assert py.keys() == nat.keys()
    for name in py:
        assert py[name] == nat[name], name
