"""YARN's Fair and Capacity schedulers on the queue tree, worked by hand (docs/yarn-schedulers.md).

Most instances use one node <cpu:12;mem:12288> so that packing plays no part: what each queue
or app holds when the offers stop follows from the comparator alone, with the arithmetic in
a comment.  Memory is what both YARN schedulers read by default.
"""

from __future__ import annotations

from collections import Counter

import pytest

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import AppSpec, NodeSpec, Resources
from rayrm.rm.core.queues.fairshare import fair_shares
from rayrm.rm.core.queues.scheduler import TreeScheduler, make_scheduler
from rayrm.rm.core.queues.tree import parse_queues
from rayrm.rm.core.queues.yarn_capacity import YarnCapacityTreeState
from rayrm.rm.core.queues.yarn_fair import YarnFairTreeState

R = Resources.parse
INF = float("inf")
BIG = "cpu:12;memory_mb:12288"


def scheduler(policy: str, queues: list, count: int = 1, capacity: str = BIG) -> TreeScheduler:
    cluster = [NodeSpec(f"m{k:02d}", R(capacity)) for k in range(count)]
    dims = ("cpu", "memory_mb")
    total = {d: sum(n.capacity[d] for n in cluster) for d in dims}
    return make_scheduler(policy, dims, cluster, parse_queues(queues, dims, total))


def app(app_id: str, queue: str, demand: str, tasks: int = 100, submit: float = 0.0, user: str = "default"):
    return AppSpec(app_id, R(demand), tasks, submit=submit, queue=queue, user=user)


def run(s: TreeScheduler, *apps: AppSpec) -> TreeScheduler:
    for a in apps:
        s.submit(a)
    s.schedule()
    return s


def running(s) -> dict[str, int]:
    return {a.app_id: a.running for a in s.cluster.apps.values()}


def by_queue(s) -> dict[str, int]:
    out: Counter = Counter()
    for a in s.cluster.apps.values():
        out[a.spec.queue] += a.running
    return dict(out)


# ----- ComputeFairShares ----------------------------------------------------------------

@pytest.mark.parametrize("weights, lo, hi, total, expected", [
    # no clamps: R = 90 / (2 + 1) = 30 -> 60, 30
    ([2, 1], [0, 0], [INF, INF], 90, [60, 30]),
    # a min of 50 binds: 50 + 2R = 90 -> R = 20; 50, 20, 20
    ([1, 1, 1], [50, 0, 0], [INF] * 3, 90, [50, 20, 20]),
    # a max of 10 binds: 10 + 2R = 90 -> R = 40; 10, 40, 40
    ([1, 1, 1], [0, 0, 0], [10, INF, INF], 90, [10, 40, 40]),
    # every max binds: T = min(90, 10 + 20) = 30; 10, 20 (the rest stays unshared)
    ([1, 1], [0, 0], [10, 20], 90, [10, 20]),
    # the mins exceed the total: R = 0, each its min (60 + 60 > 100)
    ([1, 1], [60, 60], [100, 100], 100, [60, 60]),
    # weight 3 against a min of 40: 3R + max(R, 40) = 100 -> R = 20: 60, 40
    ([3, 1], [0, 40], [INF, INF], 100, [60, 40]),
])
def test_compute_fair_shares_water_fills_weights_between_min_and_max(weights, lo, hi, total, expected):
    assert fair_shares(weights, lo, hi, total) == pytest.approx(expected)


def test_instantaneous_fair_share_counts_only_active_queues():
    """a (weight 2) and b (weight 1, min mem 6144) have apps, c (weight 1) none: c is
    inactive, its share 0.  On memory: 2R + max(R, 6144) = 12288; R < 6144 gives 2R = 6144,
    R = 3072: a 6144, b 6144.  Without b's min: 2R + R = 12288, R = 4096: a 8192, b 4096."""
    queues = [{"name": "a", "weight": 2}, {"name": "b", "min": {"memory_mb": 6144}}, {"name": "c"}]
    s = run(scheduler("yarn-fair", queues), app("a1", "a", "cpu:1;memory_mb:1024"),
            app("b1", "b", "cpu:1;memory_mb:1024"))
    assert isinstance(s.tree, YarnFairTreeState)
    shares = s.tree.fair_shares()
    assert [shares[q][1] for q in ("a", "b", "c")] == pytest.approx([6144, 6144, 0])
    assert s.tree.fair_share("") == [12, 12288]
    # what readers outside the offer see: 6144 / 12288 = 0.5 each, c 0
    assert [r["fair_share"] for r in s.tree.report()] == pytest.approx([0.5, 0.5, 0.0])
    assert s.tree.min_share("b") == [0, 6144]
    queues[1].pop("min")
    s = run(scheduler("yarn-fair", queues), app("a1", "a", "cpu:1;memory_mb:1024"),
            app("b1", "b", "cpu:1;memory_mb:1024"))
    assert s.tree.fair_share("a")[1] == pytest.approx(8192) and s.tree.fair_share("b")[1] == pytest.approx(4096)


# ----- yarn-fair: the order ------------------------------------------------------------

@pytest.mark.parametrize("policy, weight_b, expected", [
    # FairSharePolicy: least memory per weight.  512 n_a = 1024 n_b and n_a + n_b = 12 cpus:
    # n_a = 8, n_b = 4 (memory 4096 each).  Ties (both at 0, then 1024, 2048, ...) go to the
    # name, a: a b a a b a a b a a b a.
    ("yarn-fair", 1, {"a": 8, "b": 4}),
    # b weight 2: 512 n_a / 1 = 1024 n_b / 2, so n_a = n_b = 6.
    ("yarn-fair", 2, {"a": 6, "b": 6}),
    # TSF on the same tree: h_a = min(12/1, 12288/512) = 12, h_b = min(12, 12) = 12, so
    # equal task shares n_a / 12 = n_b / 12: 6 and 6.
    ("tsf", 1, {"a": 6, "b": 6}),
])
def test_fair_share_policy_equalises_memory_per_weight(policy, weight_b, expected):
    s = run(scheduler(policy, [{"name": "a"}, {"name": "b", "weight": weight_b}]),
            app("a1", "a", "cpu:1;memory_mb:512"), app("b1", "b", "cpu:1;memory_mb:1024"))
    assert by_queue(s) == expected


@pytest.mark.parametrize("min_mem, tasks_b, expected", [
    # b needy until it holds min(8192, demand 100 × 1024) = 8192: it takes 8 tasks first,
    # then a (0 / 1 < 8192 / 1) the remaining 4 cpus.
    (8192, 100, {"a": 4, "b": 8}),
    # b asks for 3 tasks only: needy up to min(8192, 3 × 1024) = 3072, done at 3; a takes 9.
    (8192, 3, {"a": 9, "b": 3}),
    # no min: equal weights and equal tasks, 6 and 6.
    (None, 100, {"a": 6, "b": 6}),
])
def test_a_needy_queue_is_served_first_up_to_its_min_or_demand(min_mem, tasks_b, expected):
    b = {"name": "b", **({"min": {"memory_mb": min_mem}} if min_mem else {})}
    s = run(scheduler("yarn-fair", [{"name": "a"}, b]),
            app("a1", "a", "cpu:1;memory_mb:1024"), app("b1", "b", "cpu:1;memory_mb:1024", tasks=tasks_b))
    assert by_queue(s) == expected


def test_two_needy_queues_go_by_usage_over_min_share():
    """a min 2048, b min 8192, tasks of 1024: needy ratios U/min; a's first task takes it to
    1/2, b's to 1/8; b stays the lower ratio while 1024 n_b / 8192 < 1024 n_a / 2048, i.e.
    n_b < 4 n_a.  Both needy until a has 2 (ratio 1) and b 8: the order is a (name tie),
    b, b, b, b (4/8 = a's 1/2 -> tie, a), a (2 = min: a leaves needy), then b to 8
    (b needy beats a), then the last 2 cpus by memory per weight: a 2048 < b 8192, a, a.
    a 4, b 8."""
    s = run(scheduler("yarn-fair", [{"name": "a", "min": {"memory_mb": 2048}},
                                    {"name": "b", "min": {"memory_mb": 8192}}]),
            app("a1", "a", "cpu:1;memory_mb:1024"), app("b1", "b", "cpu:1;memory_mb:1024"))
    assert by_queue(s) == {"a": 4, "b": 8}


def test_max_resources_and_max_running_apps_cap_a_fair_queue():
    """a max memory 4096: 4 tasks of 1024, b the other 8 cpus.  c max_apps 1 with two apps:
    the second waits unstarted while the first runs."""
    s = run(scheduler("yarn-fair", [{"name": "a", "max": {"memory_mb": 4096}}, {"name": "b"}]),
            app("a1", "a", "cpu:1;memory_mb:1024"), app("b1", "b", "cpu:1;memory_mb:1024"))
    assert by_queue(s) == {"a": 4, "b": 8}
    s = run(scheduler("yarn-fair", [{"name": "c", "max_apps": 1}]),
            app("c1", "c", "cpu:1;memory_mb:1024"), app("c2", "c", "cpu:1;memory_mb:1024", submit=1))
    assert running(s) == {"c1": 12, "c2": 0}


@pytest.mark.parametrize("parent_policy, expected", [
    # drf on the parent: x's task <2 cpu, 512> is 2/12 = 1/6 of the cpu, y's <1, 2048>
    # 2048/12288 = 1/6 of the memory; equal dominant shares, so they alternate x y x y ...
    # until the cpus run out: 2·4 + 4 = 12 cpus at 4 and 4.
    ("drf", {"p.x": 4, "p.y": 4}),
    # fair (memory) on the parent: 512 n_x = 2048 n_y; x x x x (2048 = y's after y's first),
    # in order x y x x x x(tie at 2048 to the name) y: x 5 (10 cpus), y 2 (2 cpus).
    (None, {"p.x": 5, "p.y": 2}),
])
def test_drf_on_a_parent_orders_its_children_by_dominant_share(parent_policy, expected):
    p = {"name": "p", "children": [{"name": "x"}, {"name": "y"}], **({"policy": parent_policy} if parent_policy else {})}
    s = run(scheduler("yarn-fair", [p]), app("x1", "p.x", "cpu:2;memory_mb:512"),
            app("y1", "p.y", "cpu:1;memory_mb:2048"))
    assert by_queue(s) == expected


@pytest.mark.parametrize("leaf_policy, expected", [
    ("fifo", {"a1": 12, "a2": 0}),          # first submitted takes every cpu
    (None, {"a1": 6, "a2": 6}),             # fair on apps: equal memory, 6 and 6
])
def test_a_leaf_orders_its_apps_by_its_own_policy(leaf_policy, expected):
    leaf = {"name": "a", **({"policy": leaf_policy} if leaf_policy else {})}
    s = run(scheduler("yarn-fair", [leaf, {"name": "b"}]), app("a1", "a", "cpu:1;memory_mb:1024"),
            app("a2", "a", "cpu:1;memory_mb:1024", submit=1))
    assert running(s) == expected


# ----- yarn-capacity ---------------------------------------------------------------------

def test_least_used_capacity_is_offered_first():
    """a capacity 75, b 25; guarantees 9216 and 3072 MB.  Least U/G first, ties to the larger
    guarantee: n_a / 9 = n_b / 3 with 12 cpus: a 9, b 3 (each at its capacity).  The users
    differ and user_limit_factor 4 lets each grow past its capacity; here neither needs to."""
    queues = [{"name": "a", "capacity": 75, "user_limit_factor": 4},
              {"name": "b", "capacity": 25, "user_limit_factor": 4}]
    s = run(scheduler("yarn-capacity", queues), app("a1", "a", "cpu:1;memory_mb:1024"),
            app("b1", "b", "cpu:1;memory_mb:1024"))
    assert isinstance(s.tree, YarnCapacityTreeState)
    assert s.tree.absolute_capacity("a") == 0.75 and s.tree.absolute_capacity("b") == 0.25
    assert by_queue(s) == {"a": 9, "b": 3}
    assert [(r["queue"], r["fair_share"]) for r in s.tree.report()] == [("root.a", 0.75), ("root.b", 0.25)]


@pytest.mark.parametrize("extra, expected", [
    # user_limit_factor 1 (the default): limit = G = 9216 = 9 tasks; holding 9216 is not
    # more than the limit, so one more container: 10 (YARN's ">" test), then stop.
    ({}, 10),
    # factor 2: C >= G, current = C + 1024 and limit = min(C + 1024, 18432) >= what the user
    # holds, so it grows to the whole node: 12.
    ({"user_limit_factor": 2}, 12),
    # max_capacity 90: 0.9 × 12288 = 11059.2; 10 tasks (10240), an 11th would pass it.
    ({"user_limit_factor": 2, "max_capacity": 90}, 10),
])
def test_an_idle_sibling_lends_capacity_up_to_max_capacity_and_the_user_limit(extra, expected):
    queues = [{"name": "a", "capacity": 75, **extra}, {"name": "b", "capacity": 25}]
    s = run(scheduler("yarn-capacity", queues), app("a1", "a", "cpu:1;memory_mb:1024"))
    assert by_queue(s) == {"a": expected}


@pytest.mark.parametrize("percent, users, expected", [
    # one leaf, capacity 100 (G = 12288, C < G throughout): limit = max(G / active, G · p / 100).
    # p 100: limit G, the first user (FIFO) takes all 12.
    (100, 2, [12, 0]),
    # p 50, 2 active users: limit max(6144, 6144) = 6144; u0 takes 6 and, at 6144, one more:
    # 7; u1 the other 5.
    (50, 2, [7, 5]),
    # p 25, 3 users: limit max(4096, 3072) = 4096: u0 4 + 1 = 5, u1 5, u2 the last 2.
    (25, 3, [5, 5, 2]),
])
def test_minimum_user_limit_percent_divides_a_queue_among_active_users(percent, users, expected):
    s = scheduler("yarn-capacity", [{"name": "a", "min_user_limit_percent": percent}])
    run(s, *(app(f"u{k}", "a", "cpu:1;memory_mb:1024", submit=k, user=f"u{k}") for k in range(users)))
    assert [running(s)[f"u{k}"] for k in range(users)] == expected


def test_fair_ordering_policy_inside_a_capacity_leaf():
    """Two apps of one user: fifo gives the first all 12; fair (least memory first) 6 and 6."""
    for policy, expected in (("fifo", [12, 0]), ("cmmf-mem", [6, 6])):
        s = run(scheduler("yarn-capacity", [{"name": "a", "policy": policy}]),
                app("a1", "a", "cpu:1;memory_mb:1024"), app("a2", "a", "cpu:1;memory_mb:1024", submit=1))
        assert [running(s)["a1"], running(s)["a2"]] == expected


def test_weights_stand_for_capacities_under_yarn_capacity():
    """No capacity set: weights 2 and 1 give guarantees 2/3 and 1/3 (8192 and 4096 MB):
    least used capacity first gives a 8, b 4."""
    s = run(scheduler("yarn-capacity", [{"name": "a", "weight": 2, "user_limit_factor": 2}, {"name": "b"}]),
            app("a1", "a", "cpu:1;memory_mb:1024"), app("b1", "b", "cpu:1;memory_mb:1024"))
    assert s.tree.absolute_capacity("a") == pytest.approx(2 / 3)
    assert by_queue(s) == {"a": 8, "b": 4}


# ----- settings a scheduler would ignore -------------------------------------------------

@pytest.mark.parametrize("policy, queues, message", [
    ("yarn-fair", [{"name": "a", "user_limit_factor": 2}], "user_limit_factor is a Capacity Scheduler setting"),
    ("yarn-fair", [{"name": "a", "min_user_limit_percent": 50}], "min_user_limit_percent is a Capacity"),
    ("yarn-fair", [{"name": "a", "policy": "tsf"}], "policy tsf is not a Fair Scheduler policy"),
    ("yarn-fair", [{"name": "p", "policy": "fifo", "children": [{"name": "x"}]}], "only a leaf queue"),
    ("yarn-fair", [{"name": "p", "children": [{"name": "x", "policy": "drf"}]}], "drf queue cannot sit under a fair"),
    ("yarn-capacity", [{"name": "a", "min": {"cpu": 1}}], "minResources is a Fair Scheduler setting"),
    ("yarn-capacity", [{"name": "a", "preemption": {"min_share_timeout": 30}}], "preemption timeouts"),
    ("yarn-capacity", [{"name": "a", "user_limit": 0.5}], "user_limit is rayrm's own"),
    ("yarn-capacity", [{"name": "p", "policy": "fifo", "children": [{"name": "x"}]}], "by used capacity"),
    ("yarn-capacity", [{"name": "a", "policy": "drf"}], "not a Capacity Scheduler ordering-policy"),
])
def test_settings_the_scheduler_would_ignore_are_errors(policy, queues, message):
    with pytest.raises(InputError, match=message):
        scheduler(policy, queues)


def test_the_same_settings_are_fine_where_they_are_read():
    scheduler("yarn-capacity", [{"name": "a", "user_limit_factor": 2, "min_user_limit_percent": 50}])
    scheduler("yarn-fair", [{"name": "a", "min": {"cpu": 1}, "preemption": {"min_share_timeout": 30}}])
    scheduler("yarn-fair", [{"name": "p", "policy": "drf", "children": [{"name": "x", "policy": "fifo"}]}])


# ----- the bundled worked examples, simulated ----------------------------------------------

def first_wave(config, policy: str, at: float) -> dict[str, int]:
    """Tasks per queue running at time ``at`` of a simulation of ``config`` under ``policy``."""
    from rayrm.rm.sim.engine import Simulation

    log = Simulation(config, policy=policy).run()
    queue = {j.app.app_id: j.app.queue for j in config.jobs}
    out: Counter = Counter()
    for app_id, _, _, _, _, start, end, _ in log.tasks.values():
        if start <= at < (end if end is not None else INF):
            out[queue[app_id]] += 1
    return dict(out)


@pytest.mark.parametrize("policy", ["yarn-fair", "tsf"])
def test_queues_yarn_fair_config_holds_its_worked_shares(policy):
    """configs/queues-yarn-fair.yaml's comment: research 8 (its min), eng 8 split 4/4 (batch at
    its max), under yarn-fair and, every task alike, under tsf."""
    from rayrm.rm.core.config import load_config

    cfg = load_config("configs/queues-yarn-fair.yaml")
    assert first_wave(cfg, policy, at=1) == {"research": 8, "eng.batch": 4, "eng.adhoc": 4}


@pytest.mark.parametrize("policy, expected", [
    ("yarn-capacity", {"dev": 5, "prod": 11}),      # bob's user limit 4096 MB, plus one container
    ("yarn-fair", {"dev": 8, "prod": 8}),           # dev grows to max_capacity 50%
    ("tsf", {"dev": 8, "prod": 8}),
])
def test_queues_yarn_capacity_config_under_three_schedulers(policy, expected):
    """configs/queues-yarn-capacity.yaml's comment, worked for each scheduler: the first waves
    at t = 20 (dev alone from 0, prod from 10, every task 1000 s)."""
    from rayrm.rm.core.config import load_config

    cfg = load_config("configs/queues-yarn-capacity.yaml")
    assert first_wave(cfg, policy, at=20) == expected


# ----- at the command line ---------------------------------------------------------------

@pytest.mark.parametrize("command", ["simulate", "replay", "compare"])
def test_a_fair_only_setting_under_yarn_capacity_is_one_line_exit_2(capsys, command):
    """configs/queues-yarn-fair.yaml gives research a min: under yarn-capacity that is refused
    before any work (replay: before Ray starts), naming the file, the queue and the setting."""
    from rayrm.rm.cli.main import main

    args = {"simulate": ["--policy", "yarn-capacity"], "replay": ["--policy", "yarn-capacity"],
            "compare": ["--policies", "tsf,yarn-capacity"]}[command]
    code = main([command, "configs/queues-yarn-fair.yaml", *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0] == (f"rayrm {command}: error: configs/queues-yarn-fair.yaml: field 'root.research.min': "
                      "minResources is a Fair Scheduler setting (under yarn-capacity a queue's guarantee "
                      "is its capacity); yarn-capacity would ignore it")


def test_compare_runs_tsf_yarn_fair_and_yarn_capacity_on_one_tree(tmp_path, capsys):
    """rayrm compare on configs/queues-yarn-capacity.yaml: three run directories, and each
    scheduler's first waves as worked in the config (dev 8 / prod 8 under tsf and yarn-fair,
    5 / 11 under yarn-capacity), read back from tasks.csv."""
    from rayrm.rm.cli.main import main
    from rayrm.rm.runs.reader import RunDir

    out = tmp_path / "cmp"
    assert main(["compare", "configs/queues-yarn-capacity.yaml", "--policies", "tsf,yarn-fair,yarn-capacity",
                 "--out", str(out), "--workers", "1"]) == 0
    runs = sorted(p for p in out.iterdir() if p.is_dir())
    assert len(runs) == 3
    waves = {}
    for d in runs:
        run = RunDir(d)
        tasks = run.tasks
        first = tasks[(tasks.start <= 20) & (tasks.finish > 20)]
        per_queue = first.merge(run.jobs[["app", "queue"]], on="app").groupby("queue").size()
        waves[d.name] = {q: int(n) for q, n in per_queue.items()}
    assert waves == {"tsf": {"root.dev": 8, "root.prod": 8}, "yarn-fair": {"root.dev": 8, "root.prod": 8},
                     "yarn-capacity": {"root.dev": 5, "root.prod": 11}}


@pytest.mark.parametrize("policy, expected", [
    # least memory per weight, weights 2:1: 8 and 4
    ("yarn-fair", {"a": 8, "b": 4}),
    # guarantees 2/3 and 1/3 of 12288 MB (8192, 4096): least used capacity first, 8 and 4
    ("yarn-capacity", {"a": 8, "b": 4}),
])
def test_a_restored_yarn_scheduler_goes_on_as_the_original(policy, expected):
    """The RM snapshots its state by pickling: restored mid-run, the scheduler gives a
    released container of a back to a, as the original does."""
    import pickle

    queues = [{"name": "a", "weight": 2, **({"user_limit_factor": 2} if policy == "yarn-capacity" else {})},
              {"name": "b"}]
    s = run(scheduler(policy, queues), app("a1", "a", "cpu:1;memory_mb:1024"), app("b1", "b", "cpu:1;memory_mb:1024"))
    assert by_queue(s) == expected
    a_container = next(c for c in s.cluster.containers.values() if c.app_id == "a1")
    copy = pickle.loads(pickle.dumps(s))
    for sched in (s, copy):
        sched.release(a_container.container_id)
        assert [c.app_id for c in sched.schedule()] == ["a1"]
        assert by_queue(sched) == expected


def test_a_zero_capacity_queue_runs_only_on_what_others_leave():
    """a capacity 100, z capacity 0 (the tree wants a positive weight beside it).  z's
    guarantee is 0: its used capacity is inf, so it is offered last, and its user is bounded
    by its max (the cluster), not by 0 × factor.  a's app has 8 tasks, z's is backlogged:
    a takes its 8 first (used capacity 0 against inf), z the 4 left over (not 1)."""
    s = run(scheduler("yarn-capacity", [{"name": "a", "capacity": 100}, {"name": "z", "capacity": 0, "weight": 1}]),
            app("a1", "a", "cpu:1;memory_mb:1024", tasks=8), app("z1", "z", "cpu:1;memory_mb:1024"))
    assert by_queue(s) == {"a": 8, "z": 4}
