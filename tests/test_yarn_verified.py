"""Held-back nodes asked all at once when a cap loosens (rm/core/queues/verified.py).

A worked instance shows which nodes are asked and where the task goes; random event
sequences under yarn-capacity and yarn-fair show that asking the verified nodes at once
(``bulk``) places every container where asking each node again one by one does, and
leaves the same nodes held back on the same queues.
"""

from __future__ import annotations

import random

import pytest

from rayrm.rm.core.model import AppSpec, NodeSpec, Resources
from rayrm.rm.core.queues.keyed import KeyedTreeState
from rayrm.rm.core.queues.scheduler import make_scheduler
from rayrm.rm.core.queues.tree import parse_queues

R = Resources.parse
DIMS = ("cpu", "memory_mb")


def scheduler(policy: str, queues: list, capacities: list[str], bulk: bool = True):
    nodes = [NodeSpec(f"m{k}", R(c)) for k, c in enumerate(capacities)]
    total = {d: sum(n.capacity[d] for n in nodes) for d in DIMS}
    s = make_scheduler(policy, DIMS, nodes, parse_queues(queues, DIMS, total))
    s.tree.bulk = bulk
    return s


def asked(s) -> list[int]:
    """Record the nodes ``choose`` is asked about from now on."""
    out: list[int] = []
    choose = s.tree.choose

    def recording(m, free, order):
        out.append(m)
        return choose(m, free, order)

    s.tree.choose = recording
    return out


def containers_on(s, app_id: str) -> list[int]:
    per = [0] * len(s.cluster.nodes)
    for c in s.cluster.containers.values():
        if c.app_id == app_id:
            per[s.cluster.node_index[c.node]] += 1
    return per


@pytest.mark.parametrize("bulk, expected_asked", [
    # the verified m0 (its candidate alice's a1 admitted again) comes before the freed m2;
    # m3, verified too, is not asked
    (True, [0, 0, 2]),
    # one by one: m0, m2, and m3 re-tested against a's caps (the answer: still held)
    (False, [0, 0, 2, 3]),
])
def test_a_verified_node_is_asked_only_when_its_answer_changed(bulk, expected_asked):
    """yarn-capacity, leaves a and b at capacity 50: G = 0.5 · 16384 = 8192 MB each; one
    user per leaf, so alice's limit is min(current, G · 1) = 8192: she takes tasks of 1024
    while she holds at most 8192, i.e. 9 (9216 MB).

    bob's two <2, 2048> fill m0; alice's a1 takes m1 4, m2 4, m3 1: 9 tasks, m3's 3 cpus
    held back (verified on a).  bob's container on m0 ends: m0 (2 free) is offered, alice
    is over her limit, so m0 is held back too.  One of alice's containers on m2 ends: she
    holds 8192 <= 8192 again; of a's held nodes only those where a1 fits and is admitted
    changed — m0 and m3 — and the round goes in node order, so m0 (index 0) takes her
    task before the freed m2, and she is over the limit again."""
    s = scheduler("yarn-capacity", [{"name": "a", "capacity": 50}, {"name": "b", "capacity": 50}],
                  ["cpu:4;memory_mb:4096"] * 4, bulk)
    s.submit(AppSpec("b1", R("cpu:2;memory_mb:2048"), 2, queue="b", user="bob"))
    s.schedule()
    s.submit(AppSpec("a1", R("cpu:1;memory_mb:1024"), 100, submit=1, queue="a", user="alice"))
    s.schedule()
    assert containers_on(s, "a1") == [0, 4, 4, 1]
    bob_m0 = next(c for c in s.cluster.containers.values() if c.app_id == "b1")
    s.release(bob_m0.container_id)
    s.schedule()
    a = s.tree.by_path["a"]
    held = set(a.blocked) | set(s.tree.verified.sure[a])
    assert held == {0, 3}
    assert set(s.tree.verified.sure[a]) == ({0, 3} if bulk else set())
    alice_m2 = next(c for c in s.cluster.containers.values() if c.app_id == "a1" and c.node == "m2")
    s.release(alice_m2.container_id)
    nodes = asked(s)
    s.schedule()
    assert nodes == expected_asked
    # alice: 1 on m0, 4 on m1, 3 on m2, 1 on m3 = 9 tasks again
    assert containers_on(s, "a1") == [1, 4, 3, 1]
    assert set(a.blocked) | set(s.tree.verified.sure[a]) == {0, 2, 3}


CAPACITY = [{"name": "prod", "max_capacity": 80, "children": [
                {"name": "p0", "capacity": 60, "min_user_limit_percent": 50},
                {"name": "p1", "capacity": 40, "user_limit_factor": 2}]},
            {"name": "dev", "children": [{"name": "d0", "max_apps": 2}, {"name": "d1"}]}]
FAIR = [{"name": "prod", "weight": 3, "max": {"memory_mb": 20000}, "children": [
            {"name": "p0", "max_apps": 2}, {"name": "p1", "max": {"cpu": 6}}]},
        {"name": "dev", "children": [{"name": "d0"}, {"name": "d1", "min": {"memory_mb": 4096}}]}]
LEAVES = ["prod.p0", "prod.p1", "dev.d0", "dev.d1"]
DEMANDS = ["cpu:1;memory_mb:1024", "cpu:2;memory_mb:1024", "cpu:1;memory_mb:3072", "cpu:3;memory_mb:2048"]


def held_back(tree: KeyedTreeState) -> dict:
    """Which nodes each queue holds back, which wait to be re-tested against which queues,
    and the nodes' held free space: the same whether verified nodes are asked at once."""
    verified = tree.verified
    return {"held": {q.name: sorted(set(q.blocked) | set(verified.sure[q])) for q in tree.queues},
            "recheck": {m: sorted(q.name for q in qs) for m, qs in tree._recheck.items()},
            "free": dict(tree._held)}


def replay(policy: str, seed: int, bulk: bool) -> tuple[list, list, int]:
    """A random sequence of submits, releases, app finishes and node losses and returns,
    with a round of offers after each step: every placement, the held nodes each time, and
    how many times a node was asked."""
    rng = random.Random(seed)
    caps = ["cpu:4;memory_mb:4096", "cpu:8;memory_mb:8192", "cpu:4;memory_mb:8192"] * 3
    s = scheduler(policy, CAPACITY if policy == "yarn-capacity" else FAIR, caps, bulk)
    nodes = asked(s)
    placed, states, apps, lost = [], [], 0, []
    for step in range(400):
        roll = rng.random()
        running = sorted(s.cluster.containers)
        if roll < 0.15 or not running:
            s.submit(AppSpec(f"j{apps}", R(rng.choice(DEMANDS)), rng.randint(1, 30), submit=step,
                             queue=rng.choice(LEAVES), user=f"u{rng.randint(0, 3)}"))
            apps += 1
        elif roll < 0.85:
            for cid in rng.sample(running, min(len(running), rng.randint(1, 3))):
                s.release(cid)
        elif roll < 0.93:
            s.finish_app(rng.choice(sorted(s.cluster.apps)))
        elif roll < 0.97 and not lost:
            lost = [f"m{rng.randrange(9)}"]
            s.remove_nodes(lost)
        elif lost:
            s.add_nodes([NodeSpec(lost[0], R(caps[int(lost[0][1:])]))])
            lost = []
        placed.append([(c.app_id, c.node) for c in s.schedule()])
        states.append(held_back(s.tree))
    return placed, states, len(nodes)


@pytest.mark.parametrize("policy", ["yarn-capacity", "yarn-fair"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_asking_verified_nodes_at_once_decides_as_asking_each(policy, seed):
    placed, states, asks = replay(policy, seed, bulk=True)
    one_by_one, states_one, asks_one = replay(policy, seed, bulk=False)
    # the instance is not idle: hundreds of containers placed, nodes held back by caps,
    # and fewer nodes asked when the verified ones are asked at once
    assert sum(map(len, placed)) > 500
    assert any(any(h for h in st["held"].values()) for st in states)
    assert asks < asks_one
    for step, (got, want) in enumerate(zip(placed, one_by_one)):
        assert got == want, f"step {step}"
    for step, (got, want) in enumerate(zip(states, states_one)):
        assert got == want, f"step {step}"
