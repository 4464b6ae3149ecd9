"""Hierarchical TSF, worked by hand: the offer down the queue tree (docs/design.md, "Queues").

Resources are written as compact literals (``cpu:1;gpu:1``); each instance states what every
queue holds when the offers stop, with the arithmetic in a comment.
"""

from __future__ import annotations

from collections import Counter

import pytest

from rayrm.rm.core.config import load_config, parse_config
from rayrm.rm.core.model import AppSpec, NodeSpec, Resources
from rayrm.rm.core.queues.scheduler import TreeScheduler, make_scheduler
from rayrm.rm.core.queues.tree import parse_queues
from rayrm.rm.sim.engine import Simulation

R = Resources.parse


def nodes(count: int, capacity: str) -> list[NodeSpec]:
    return [NodeSpec(f"m{k:02d}", R(capacity)) for k in range(count)]


def tree_scheduler(queues: list, cluster: list[NodeSpec], policy: str = "tsf", naive: bool = False):
    dims = tuple(sorted({d for n in cluster for d in n.capacity}, key=lambda d: (d != "cpu", d)))
    total = {d: sum(n.capacity[d] for n in cluster) for d in dims}
    return TreeScheduler(policy, dims, cluster, parse_queues(queues, dims, total), naive=naive)


def app(app_id: str, queue: str, demand: str, tasks: int = 100, submit: float = 0.0, user: str = "default"):
    return AppSpec(app_id, R(demand), tasks, submit=submit, queue=queue, user=user)


def running(s) -> dict[str, int]:
    return {a.app_id: a.running for a in s.cluster.apps.values()}


def by_queue(s) -> Counter:
    out: Counter = Counter()
    for a in s.cluster.apps.values():
        out[a.spec.queue] += a.running
    return out


# ----- one queue is flat TSF --------------------------------------------------------

@pytest.mark.parametrize("queue", ["default", "only"])
def test_one_queue_is_flat_tsf_exactly(tmp_path, queue):
    """paper-micro (tsf-paper Table II: 50 nodes, four jobs, job3 constrained) in one leaf
    queue places every task where flat TSF does, at the same time."""
    flat = load_config("configs/paper-micro.yaml")
    doc = {"cluster": {"nodes": [{"name": "n{i:02d}", "count": 25, "capacity": {"cpu": 1, "memory_mb": 1024}},
                                 {"name": "n{i:02d}", "count": 25, "start": 26,
                                  "capacity": {"cpu": 2, "memory_mb": 2048}}]},
           "queues": [{"name": queue}]}
    import yaml
    raw = yaml.safe_load(open("configs/paper-micro.yaml"))
    raw["queues"] = doc["queues"]
    for job in raw["workload"]["jobs"]:
        job["queue"] = queue
    tree = parse_config(raw)
    assert not tree.queues.flat
    a, b = Simulation(flat).run(), Simulation(tree).run()
    rows = lambda log: sorted((r[0], r[1], r[2], r[3], r[5]) for r in log.tasks.values())  # noqa: E731
    assert isinstance(Simulation(tree).scheduler, TreeScheduler)
    assert len(a.tasks) == 1350 and rows(a) == rows(b)


# ----- weights, whatever the job counts ----------------------------------------------

def test_backlogged_siblings_hold_task_shares_in_proportion_to_their_weights():
    """12 nodes <cpu:1>; queue a (weight 2) runs one job, queue b (weight 1) three, all
    backlogged with 1-cpu tasks (h = 12 each).  H-TSF equalises S/W: S_a = n_a/12,
    S_b = n_b/12; n_a/12/2 = n_b/12/1 and n_a + n_b = 12 give n_a = 8, n_b = 4 — not 3 to 9,
    as one flat TSF over four equal jobs would."""
    s = tree_scheduler([{"name": "a", "weight": 2}, {"name": "b", "weight": 1}], nodes(12, "cpu:1"))
    s.submit(app("a1", "a", "cpu:1"))
    for k in range(3):
        s.submit(app(f"b{k}", "b", "cpu:1"))
    s.schedule()
    assert by_queue(s) == {"a": 8, "b": 4}
    # inside b, flat TSF over three equal jobs: 2, 1, 1 (ties on submit, then app id)
    assert [running(s)[f"b{k}"] for k in range(3)] == [2, 1, 1]


def test_task_shares_not_tasks_are_what_weights_divide():
    """6 nodes <cpu:2;mem:2>; a (weight 1): one job of <2,1>, h = 6; b (weight 1): two jobs
    of <1,1>, h = 12.  Equal S: n_a/6 = n_b/12, so n_b = 2 n_a; cpu 2 n_a + n_b = 12 gives
    n_a = 3, n_b = 6 (3 each), every cpu taken (mem 9 of 12)."""
    s = tree_scheduler([{"name": "a"}, {"name": "b"}], nodes(6, "cpu:2;mem:2"))
    s.submit(app("a1", "a", "cpu:2;mem:1"))
    s.submit(app("b1", "b", "cpu:1;mem:1"))
    s.submit(app("b2", "b", "cpu:1;mem:1"))
    s.schedule()
    assert running(s) == {"a1": 3, "b1": 3, "b2": 3}


def test_the_tree_reports_each_queues_share_usage_and_fair_share():
    """The weights test's allocation as a reader outside the offer sees it: a (weight 2)
    S = 8/12, fair share 2/3, 8 cpus; b (weight 1) S = 4/12, 1/3, 4 cpus, three apps running."""
    s = tree_scheduler([{"name": "a", "weight": 2}, {"name": "b", "max": {"cpu": 6}}], nodes(12, "cpu:1"))
    s.submit(app("a1", "a", "cpu:1"))
    for k in range(3):
        s.submit(app(f"b{k}", "b", "cpu:1"))
    s.schedule()
    rows = {r["queue"]: r for r in s.tree.report()}
    assert rows["root.a"]["share"] == pytest.approx(8 / 12) and rows["root.a"]["fair_share"] == pytest.approx(2 / 3)
    assert rows["root.b"]["usage"] == {"cpu": 4} and rows["root.b"]["running_apps"] == 3
    assert rows["root.b"]["max"] == {"cpu": 6} and rows["root.a"]["max"] is None


# ----- min, max, max_apps, user_limit --------------------------------------------------

@pytest.mark.parametrize("min_cpu, expected", [(None, {"a": 2, "b": 8}), (6, {"a": 6, "b": 4})])
def test_a_queue_below_its_min_is_served_first(min_cpu, expected):
    """10 nodes <cpu:1>; a (weight 1), b (weight 4), both backlogged.  By weight alone
    n_a/10/1 = n_b/10/4 gives 2 and 8; with min {cpu: 6} a is needy until it holds 6 cpus
    and is offered every node first: 6, then b the other 4."""
    a = {"name": "a", "weight": 1, **({"min": {"cpu": min_cpu}} if min_cpu else {})}
    s = tree_scheduler([a, {"name": "b", "weight": 4}], nodes(10, "cpu:1"))
    s.submit(app("b1", "b", "cpu:1"))
    s.submit(app("a1", "a", "cpu:1"))
    s.schedule()
    assert by_queue(s) == expected


def test_max_is_never_exceeded_even_with_nodes_idle():
    """10 nodes <cpu:1>; a has max {cpu: 30%} = 3 cpus, b one job of 2 tasks: a 3, b 2, five
    nodes idle.  When one of a's tasks ends, a takes that cpu back (3 again), no more."""
    s = tree_scheduler([{"name": "a", "max": {"cpu": "30%"}}, {"name": "b"}], nodes(10, "cpu:1"))
    s.submit(app("a1", "a", "cpu:1"))
    s.submit(app("b1", "b", "cpu:1", tasks=2))
    placed = s.schedule()
    assert by_queue(s) == {"a": 3, "b": 2}
    a_container = next(c for c in placed if c.app_id == "a1")
    s.release(a_container.container_id)
    s.schedule()
    assert by_queue(s) == {"a": 3, "b": 2}


def test_a_parent_max_caps_its_children_together():
    """8 nodes <cpu:1>; eng has max {cpu: 4}, its leaves x and y each a backlogged job,
    research one: eng holds 4 (x 2, y 2), research the other 4."""
    s = tree_scheduler([{"name": "eng", "max": {"cpu": 4}, "children": [{"name": "x"}, {"name": "y"}]},
                        {"name": "research"}], nodes(8, "cpu:1"))
    for q in ("eng.x", "eng.y"):
        s.submit(app(q, q, "cpu:1"))
    s.submit(app("r", "research", "cpu:1"))
    s.schedule()
    assert by_queue(s) == {"eng.x": 2, "eng.y": 2, "research": 4}


def test_max_apps_holds_the_later_apps_until_one_ends():
    """10 nodes <cpu:1>; leaf q with max_apps 2 gets five 1-task jobs: two run, three wait
    while eight nodes idle; when the first ends, the third starts."""
    s = tree_scheduler([{"name": "q", "max_apps": 2}], nodes(10, "cpu:1"))
    for k in range(5):
        s.submit(app(f"j{k}", "q", "cpu:1", tasks=1, submit=k))
    placed = s.schedule()
    assert [c.app_id for c in placed] == ["j0", "j1"]
    s.release(placed[0].container_id)
    s.finish_app("j0")
    assert [c.app_id for c in s.schedule()] == ["j2"]


def test_user_limit_bounds_one_users_apps():
    """10 nodes <cpu:1>; leaf q with user_limit 0.3 (of the cluster: 3 cpus): alice's two
    backlogged jobs hold 3 together, bob's job 3, nothing else asks: 4 nodes idle."""
    s = tree_scheduler([{"name": "q", "user_limit": 0.3}], nodes(10, "cpu:1"))
    s.submit(app("a1", "q", "cpu:1", user="alice"))
    s.submit(app("a2", "q", "cpu:1", user="alice"))
    s.submit(app("b1", "q", "cpu:1", user="bob"))
    s.schedule()
    r = running(s)
    assert r["a1"] + r["a2"] == 3 and r["b1"] == 3


def test_jobs_for_a_missing_or_parent_queue_are_rejected_with_the_reason():
    s = tree_scheduler([{"name": "eng", "children": [{"name": "batch"}]}], nodes(2, "cpu:1"))
    assert s.submit(app("x", "nope", "cpu:1"))[1] == "queue root.nope does not exist"
    assert s.submit(app("y", "eng", "cpu:1"))[1] == "queue root.eng is a parent queue (jobs go to leaf queues)"
    assert s.submit(app("z", "root.eng.batch", "cpu:1"))[0] is not None
    flat = make_scheduler("tsf", ("cpu",), nodes(2, "cpu:1"))
    assert flat.submit(app("w", "eng", "cpu:1"))[1] == "queue root.eng does not exist"


# ----- the H-DRF paper's examples ------------------------------------------------------

def h_drf_starvation(naive: bool):
    """H-DRF's first example: n1 (weight 1) asks <0 cpu, 1 gpu>; n2 (weight 1) has n2,1
    asking <1, 0> and n2,2 asking <0, 1>.  10 nodes <cpu:1;gpu:1>.  n2,1 arrives first and
    takes every cpu; then n1 and n2,2 arrive."""
    s = tree_scheduler([{"name": "n1"}, {"name": "n2", "children": [{"name": "n21"}, {"name": "n22"}]}],
                       nodes(10, "cpu:1;gpu:1"), naive=naive)
    s.submit(app("a21", "n2.n21", "cpu:1"))
    s.schedule()
    s.submit(app("a1", "n1", "gpu:1"))
    s.submit(app("a22", "n2.n22", "gpu:1"))
    s.schedule()
    return running(s)


def test_h_drf_starvation_reproduced_by_the_naive_aggregate():
    """Naive: n2's share counts n2,1's ten cpu tasks, S_n2 = 10/10 + g22/10 >= 1 >= S_n1 =
    g1/10 for any g1 <= 10, so every gpu goes to n1 (ties on the name) and n2,2 starves."""
    assert h_drf_starvation(naive=True) == {"a21": 10, "a1": 10, "a22": 0}


def test_h_tsf_shares_the_gpus_that_h_drf_shares():
    """H-TSF: on a node with only a gpu free, n2,1 is not active, so ρ_n2 = (1/1) ρ_n2,2 =
    g22/10 against ρ_n1 = g1/10: the gpus go 5 and 5, as H-DRF's."""
    assert h_drf_starvation(naive=False) == {"a21": 10, "a1": 5, "a22": 5}


def h_drf_blocking(naive: bool):
    """H-DRF's second example: n1, n2 ask <1 cpu, 0>, n3 has n3,1 <1, 0> and n3,2 <0, 1>,
    n4 asks <0, 1>; all weights 1, all backlogged from the start; 12 nodes <cpu:1;gpu:1>."""
    s = tree_scheduler([{"name": "n1"}, {"name": "n2"},
                        {"name": "n3", "children": [{"name": "n31"}, {"name": "n32"}]}, {"name": "n4"}],
                       nodes(12, "cpu:1;gpu:1"), naive=naive)
    for a, q, d in (("a1", "n1", "cpu:1"), ("a2", "n2", "cpu:1"), ("a31", "n3.n31", "cpu:1"),
                    ("a32", "n3.n32", "gpu:1"), ("a4", "n4", "gpu:1")):
        s.submit(app(a, q, d))
    s.schedule()
    return running(s)


def test_h_drf_blocking_starves_n31_under_the_naive_aggregate():
    """Naive: S_n3 = (c31 + g32)/12 counts n3,2's gpu tasks against n3,1 on the cpus.  Each
    node is offered its cpu first, to the least of c1, c2, c31 + g32 (ties on the name), then
    its gpu to the lesser of c31 + g32 and g4.  After k nodes the cpus went alternately to
    n1 and n2 and the gpus alternately to n3,2 and n4, so min(c1, c2) = floor(k/2) <=
    ceil(k/2) = g32 <= c31 + g32: n3,1 never comes first and ends with no cpu at all
    (6, 6, 0; gpus 6 and 6) though n3 is owed a quarter and n3,1 at least 1/8 of the cpus."""
    assert h_drf_blocking(naive=True) == {"a1": 6, "a2": 6, "a31": 0, "a32": 6, "a4": 6}


def test_h_tsf_gives_n32_and_n4_half_the_gpus_each():
    """H-TSF: on a node whose cpu is taken n3,1 is not active and ρ_n3 = ρ_n3,2 = g32/12
    against ρ_n4 = g4/12: the gpus split 6 and 6 (H-DRF's half each).  On the cpus, while
    both of n3's children are active ρ_n3 = (2/1) min(ρ_31, ρ_32) = 2 c31/12, so n1 and n2
    hold twice n3,1: node by node (ties on the name) c1, c2, c31 end 5, 5, 2.  n3,1 holds
    more than the 1/8 of the cpus it is owed (1.5), less than H-DRF's 1/3: TSF counts a
    queue's tasks of every kind as its work, where DRF takes the max over resources."""
    r = h_drf_blocking(naive=False)
    assert r == {"a1": 5, "a2": 5, "a31": 2, "a32": 6, "a4": 6}


def test_a_restored_tree_scheduler_goes_on_as_the_original():
    """The RM snapshots its state by pickling: a tree scheduler restored mid-run places the
    next tasks as the one that was not (backlogged weights 2:1 on 12 nodes: 8 and 4, and a
    released container of a goes back to a)."""
    import pickle

    s = tree_scheduler([{"name": "a", "weight": 2}, {"name": "b", "max_apps": 1}], nodes(12, "cpu:1"))
    s.submit(app("a1", "a", "cpu:1"))
    s.submit(app("b1", "b", "cpu:1"))
    s.submit(app("b2", "b", "cpu:1"))
    placed = s.schedule()
    copy = pickle.loads(pickle.dumps(s))
    for sched in (s, copy):
        sched.release(placed[0].container_id)
        again = sched.schedule()
        assert [c.app_id for c in again] == [placed[0].app_id]
        assert by_queue(sched) == {"a": 8, "b": 4} and running(sched)["b2"] == 0


def test_a_leafs_policy_orders_its_apps():
    """4 nodes <cpu:1>, two equal leaves: fifo in f (the first app takes all f gets, 2 cpus),
    tsf in t (2 apps, 1 each)."""
    s = tree_scheduler([{"name": "f", "policy": "fifo"}, {"name": "t"}], nodes(4, "cpu:1"))
    for q in ("f", "t"):
        s.submit(app(f"{q}1", q, "cpu:1", submit=0))
        s.submit(app(f"{q}2", q, "cpu:1", submit=1))
    s.schedule()
    assert running(s) == {"f1": 2, "f2": 0, "t1": 1, "t2": 1}


@pytest.mark.parametrize("queues, policy, message", [
    ([{"name": "a", "policy": "pm-drf"}], "tsf", "policy pm-drf keys per node, picks nodes or counts slots"),
    ([{"name": "a"}], "slots", "policy slots keys per node, picks nodes or counts slots"),
    ([{"name": "a", "policy": "fifo", "children": [{"name": "b"}]}], "tsf",
     "policy fifo has no per-task share to order queue root.a's children by"),
])
def test_policies_a_tree_cannot_use_are_refused_in_one_line(queues, policy, message):
    from rayrm.rm.core.errors import InputError
    with pytest.raises(InputError, match=message):
        tree_scheduler(queues, nodes(2, "cpu:1"), policy=policy)


def test_a_drf_parent_counts_a_child_by_the_dominant_share_of_its_usage():
    """root under drf, whose share aggregates by usage (rm/core/shares.py): 10 nodes
    <cpu:2;mem:2>; a holds a1 <1 cpu> and a2 <1 mem>, b holds b1 <1, 1>.  a's share is
    max(cpu_a, mem_a)/20, not the sum of its apps' dominant shares: with n_a1 = n_a2 = n_b = x
    (DRF inside a too), cpu x + x <= 20 and mem x + x <= 20 give x = 10 — every resource
    used, each queue's dominant share 1/2.  (Summing a1's and a2's would hold a to
    2x_a = n_b: 7, 7 and 13 here.)"""
    s = tree_scheduler([{"name": "a"}, {"name": "b"}], nodes(10, "cpu:2;mem:2"), policy="drf")
    s.submit(app("a1", "a", "cpu:1"))
    s.submit(app("a2", "a", "mem:1"))
    s.submit(app("b1", "b", "cpu:1;mem:1"))
    s.schedule()
    assert running(s) == {"a1": 10, "a2": 10, "b1": 10}
    assert [r["share"] for r in s.tree.report()] == [0.5, 0.5]
