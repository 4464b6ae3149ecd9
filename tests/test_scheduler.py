"""Online scheduler: the papers' worked examples, then invariants on random instances.

The online algorithm (tsf-paper §V-D) is greedy and never preempts, so from an
empty cluster it can land on a different allocation than progressive filling.
With tasks finishing and their resources offered again ("churn"), it settles on
the paper's allocation; ``settle`` releases the oldest container and reschedules,
as the simulator does, and returns what runs after enough rounds.
"""

from __future__ import annotations

import random
from collections import Counter, deque

import pytest

from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.model import EPS, AppSpec, NodeSpec, Resources
from rayrm.rm.core.policies import POLICY_NAMES
from rayrm.rm.core.scheduler import OnlineScheduler

R = Resources.parse
C = Constraint.parse
MANY = 10 ** 6  # "enough pending tasks": no app ever runs out


def settle(policy, dims, nodes, apps, rounds=300):
    s = OnlineScheduler(policy, dims, nodes)
    for a in apps:
        app, reason = s.submit(a)
        assert reason is None, reason
    running = deque(s.schedule())
    for _ in range(rounds):
        s.release(running.popleft().container_id)
        running.extend(s.schedule())
    return s, Counter(c.app_id for c in running), Counter((c.app_id, c.node) for c in running)


# ----- tsf-paper Fig. 4 -------------------------------------------------------

FIG4_NODES = [NodeSpec("m1", R("cpu:9;mem:12")), NodeSpec("m2", R("cpu:3;mem:4")),
              NodeSpec("m3", R("cpu:9;mem:12"))]
FIG4_APPS = [AppSpec("u1", R("cpu:1;mem:2"), MANY, constraint=C("node in (m1, m2)")),
             AppSpec("u2", R("cpu:3;mem:1"), MANY, constraint=C("node == m2")),
             AppSpec("u3", R("cpu:1;mem:4"), MANY)]


def test_fig4_h_counts_tasks_with_constraints_removed():
    s = OnlineScheduler("tsf", ("cpu", "mem"), FIG4_NODES)
    apps = [s.submit(a)[0] for a in FIG4_APPS]
    # u1 <1,2>: m1 min(9/1, 12/2) = 6, m2 min(3, 2) = 2, m3 6  -> 14
    # u2 <3,1>: m1 min(3, 12) = 3,   m2 min(1, 4) = 1, m3 3  -> 7
    # u3 <1,4>: m1 min(9, 3) = 3,    m2 min(3, 1) = 1, m3 3  -> 7
    assert [a.h for a in apps] == [14, 7, 7]
    # h^c (CDRF) counts only eligible nodes: u1 on m1, m2 -> 8; u2 on m2 -> 1; u3 everywhere -> 7
    assert [a.h_c for a in apps] == [8, 1, 7]


def test_fig4_online_tsf_settles_on_the_paper_allocation():
    s, tasks, placed = settle("tsf", ("cpu", "mem"), FIG4_NODES, FIG4_APPS)
    # Fig. 4: u1 6 tasks on m1, u2 1 on m2, u3 3 on m3; shares 6/14 = 3/7, 1/7, 3/7.
    assert tasks == {"u1": 6, "u2": 1, "u3": 3}
    assert placed == {("u1", "m1"): 6, ("u2", "m2"): 1, ("u3", "m3"): 3}
    shares = {a.app_id: a.running / a.h for a in s.cluster.apps.values()}
    assert shares == pytest.approx({"u1": 3 / 7, "u2": 1 / 7, "u3": 3 / 7})


# ----- tsf-paper Fig. 2 and Fig. 3: where CDRF goes wrong --------------------

FIG2_NODES = [NodeSpec("m1", R("cpu:18;mem:18")), NodeSpec("m2", R("cpu:18;mem:18"))]


def fig2_apps(u2_lies=False):
    return [AppSpec("u1", R("cpu:1;mem:2"), MANY),
            AppSpec("u2", R("cpu:1;mem:3"), MANY,
                    constraint=C("node in (m1, m2)" if u2_lies else "node in (m2)"))]


def test_fig2_cdrf_equalises_work_slowdown():
    _, tasks, placed = settle("cdrf", ("cpu", "mem"), FIG2_NODES, fig2_apps())
    # h^c: u1 18 (9 per machine by memory), u2 6 (m2 only, 18/3). Slowdown 12/18 = 4/6 = 2/3.
    assert tasks == {"u1": 12, "u2": 4}
    assert placed == {("u1", "m1"): 9, ("u1", "m2"): 3, ("u2", "m2"): 4}


def test_fig2_cdrf_rewards_u2_for_claiming_m1():
    _, tasks, _ = settle("cdrf", ("cpu", "mem"), FIG2_NODES, fig2_apps(u2_lies=True))
    # Claiming m1 raises u2's h^c to 12; CDRF now gives it 6 tasks (2 more than truthful).
    assert tasks["u2"] == 6


def test_fig2_tsf_gives_both_half():
    _, tasks, _ = settle("tsf", ("cpu", "mem"), FIG2_NODES, fig2_apps())
    # h (no constraints): u1 18, u2 12.  u1 9 -> 9/18 = 1/2; u2 6 (all of m2) -> 6/12 = 1/2.
    assert tasks == {"u1": 9, "u2": 6}


FIG3_NODES = [NodeSpec(f"m{i}", R("cpu:3")) for i in (1, 2, 3)]
FIG3_WHERE = {"u1": "m1", "u2": "m1, m2, m3", "u3": "m2", "u4": "m2", "u5": "m3", "u6": "m3",
              "u7": "m3"}
FIG3_APPS = [AppSpec(u, R("cpu:1"), MANY, constraint=C(f"node in ({w})")) for u, w in FIG3_WHERE.items()]


def test_fig3_cdrf_gives_u2_three_tasks():
    _, tasks, placed = settle("cdrf", ("cpu",), FIG3_NODES, FIG3_APPS)
    # h^c: u2 9, the others 3; slowdown 1/3 each: u2 3 tasks (2 on m1, 1 on m2), the others 1.
    assert tasks == {"u1": 1, "u2": 3, "u3": 1, "u4": 1, "u5": 1, "u6": 1, "u7": 1}
    assert placed[("u2", "m1")] == 2 and placed[("u2", "m2")] == 1


def test_fig3_tsf_online_is_the_integral_neighbour_of_one_and_a_half():
    _, tasks, _ = settle("tsf", ("cpu",), FIG3_NODES, FIG3_APPS)
    # Divisible TSF gives u1..u4 1.5 each on m1, m2 (6 CPUs / 4) and u5..u7 1 each on m3.
    # Indivisibly the 6 CPUs of m1, m2 still go 6 among u1..u4 with nobody below 1,
    # and m3 stays with u5..u7.
    assert sum(tasks[u] for u in ("u1", "u2", "u3", "u4")) == 6
    assert min(tasks[u] for u in ("u1", "u2", "u3", "u4")) >= 1
    assert [tasks[u] for u in ("u5", "u6", "u7")] == [1, 1, 1]


# ----- one machine (Theorem 6) and one resource (Theorem 7) -------------------

@pytest.mark.parametrize("policy", ["drf", "tsf"])
def test_single_machine_drf_example(policy):
    s = OnlineScheduler(policy, ("cpu", "mem"), [NodeSpec("m", R("cpu:9;mem:18"))])
    for a in (AppSpec("a", R("cpu:1;mem:4"), MANY), AppSpec("b", R("cpu:3;mem:1"), MANY)):
        s.submit(a)
    placed = Counter(c.app_id for c in s.schedule())
    # DRF: a's dominant share 4/18 = 2/9 per task, b's 3/9 = 1/3.  Serving the lower:
    # a 2/9, b 1/3, a 4/9, b 2/3, a 2/3 -> <3*1 + 2*3, 3*4 + 2*1> = <9, 14>: CPU full.
    # TSF: h_a = floor(min(9, 4.5)) = 4, h_b = floor(min(3, 18)) = 3: steps 1/4 and 1/3,
    # the same order of service, the same 3 and 2.
    assert placed == {"a": 3, "b": 2}


CHOOSY_NODES = [NodeSpec(f"m{i}", R("cpu:1")) for i in range(1, 10)]
CHOOSY_APPS = [AppSpec("c1", R("cpu:1"), MANY, constraint=C("node in (m1..m2)")),
               AppSpec("c2", R("cpu:1"), MANY, constraint=C("node in (m2..m5)")),
               AppSpec("c3", R("cpu:1"), MANY, constraint=C("node in (m5..m9)"))]


@pytest.mark.parametrize("policy", ["cmmf-cpu", "tsf"])
def test_choosy_fig5_cmmf(policy):
    _, tasks, _ = settle(policy, ("cpu",), CHOOSY_NODES, CHOOSY_APPS)
    # choosy-paper Fig. 5c: c1 keeps m1, m2 (2); c2 m3..m5 (3); c3 m6..m9 (4).
    assert tasks == {"c1": 2, "c2": 3, "c3": 4}


# ----- the micro-benchmark cluster of Table II --------------------------------

def test_table2_h_values():
    from rayrm.rm.core.config import load_config
    cfg = load_config("configs/paper-micro.yaml")
    s = OnlineScheduler("tsf", cfg.dims, cfg.nodes)
    hs = [s.submit(j.app)[0].h for j in cfg.jobs]
    # job1 <1 CPU, 512 MB>: 25 x 1 + 25 x min(2, 2) = 75; job2 <0.5, 512>: 25 x 2 + 25 x 2 = 100;
    # job3 as job2 = 100; job4 as job1 = 75.
    assert hs == [75, 100, 100, 75]


# ----- slots, DRFH best fit, per-machine DRF ----------------------------------

def test_slots_fragment_as_a_slot_scheduler():
    nodes = [NodeSpec("big", R("cpu:14;mem:28")), NodeSpec("small", R("cpu:3;mem:7"))]
    s = OnlineScheduler("slots", ("cpu", "mem"), nodes)
    # Slot = largest node / 14 = <1, 2>.  big holds 14 slots, small floor(min(3, 3.5)) = 3.
    assert [n.capacity[-1] for n in s.cluster.nodes] == [14, 3]
    app, _ = s.submit(AppSpec("a", R("cpu:1.5;mem:1"), MANY))
    # A <1.5, 1> task takes ceil(max(1.5/1, 1/2)) = 2 slots: big 7 tasks, small 1 (not 2,
    # though 2 x 1.5 = 3 CPUs would fit small's real resources).
    placed = Counter(c.node for c in s.schedule())
    assert placed == {"big": 7, "small": 1}
    assert app.key == pytest.approx(8 * 2 / 17)  # 16 of the 17 slots


def test_drfh_best_fit_picks_the_least_h():
    # Totals <10, 10>.  Task <1, 1>: D = <0.1, 0.1>, normalised by D_1 -> <1, 1>.
    # node a free <6, 1> -> c/c_1 = <1, 1/6>: H = |1-1| + |1-1/6| = 5/6.
    # node b free <4, 9> -> <1, 9/4>: H = |1-1| + |1-9/4| = 5/4.  Best fit: a.
    nodes = [NodeSpec("b", R("cpu:4;mem:9")), NodeSpec("a", R("cpu:6;mem:1"))]
    s = OnlineScheduler("drfh-bf", ("cpu", "mem"), nodes)
    s.submit(AppSpec("x", R("cpu:1;mem:1"), 1))
    assert [c.node for c in s.schedule()] == ["a"]
    # First fit would have taken the first node offered, b.
    ff = OnlineScheduler("drfh-ff", ("cpu", "mem"), nodes)
    ff.submit(AppSpec("x", R("cpu:1;mem:1"), 1))
    assert [c.node for c in ff.schedule()] == ["b"]


@pytest.mark.parametrize("seed", range(8))
def test_drfh_best_fit_takes_the_least_h_over_every_node_as_apps_come_and_go(seed):
    # Best fit scores only the nodes freed since the last schedule() for an app already
    # waiting, and rescores only the nodes chosen since for an app new this round; here
    # every choice is checked against H of eq. 9 over *all* nodes, worked from scratch:
    # H(i, l) = sum_r |D_ir / D_i,lead - c_lr / c_l,lead|, D and c as shares of the totals.
    rng = random.Random(seed)
    dims, nodes, apps = random_instance(rng)
    s = OnlineScheduler("drfh-bf", dims, nodes)
    cluster = s.cluster
    real_allocate = cluster.allocate
    checked, wrong = [], []

    def h_of(app, node):
        total = cluster.total
        lead = next(r for r, d in enumerate(app.demand) if d > 0)
        want = [d / t / (app.demand[lead] / total[lead]) for d, t in zip(app.demand, total)]
        share = [f / t for f, t in zip(node.free, total)]
        return sum(abs(w - c / share[lead]) for w, c in zip(want, share)) if share[lead] > 0 else None

    def checked_allocate(app, node, task=-1):
        scores = {n.index: h_of(app, n) for n in cluster.nodes
                  if app.eligible[n.index] and cluster.fits(app, n)}
        scores = {m: h for m, h in scores.items() if h is not None}
        least = min(scores.values())
        first = min(m for m, h in scores.items() if h <= least + 1e-9)
        checked.append(node.index)
        if node.index != first:
            wrong.append((app.app_id, node.name, cluster.nodes[first].name))
        return real_allocate(app, node, task)

    cluster.allocate = checked_allocate
    waiting = deque(apps)
    s.submit(waiting.popleft())
    running = deque(s.schedule())
    for step in range(300):
        if waiting and step % 25 == 0:          # a new app now and then: it may fit anywhere
            s.submit(waiting.popleft())
        if running:
            s.release(running.popleft().container_id)
        running.extend(s.schedule())
    assert wrong == []
    assert len(checked) > 20, "the instance places enough tasks to test something"


def test_pm_drf_equalises_dominant_share_per_machine():
    # One machine <9, 18> as in the DRF example, but keys are per machine: the same 3 and 2.
    # Then a second machine <6, 6> only b can use: per-machine DRF serves b there alone
    # (2 tasks of <3, 1>), without counting its tasks on the first machine.
    nodes = [NodeSpec("m", R("cpu:9;mem:18")), NodeSpec("n", R("cpu:6;mem:6"))]
    s = OnlineScheduler("pm-drf", ("cpu", "mem"), nodes)
    s.submit(AppSpec("a", R("cpu:1;mem:4"), MANY, constraint=C("node == m")))
    s.submit(AppSpec("b", R("cpu:3;mem:1"), MANY))
    assert Counter((c.app_id, c.node) for c in s.schedule()) == {("a", "m"): 3, ("b", "m"): 2,
                                                                 ("b", "n"): 2}


# ----- rejection ----------------------------------------------------------------

@pytest.mark.parametrize("demand, constraint, reason", [
    ("cpu:1;gpu:1", "", "demand names resource gpu that no node has"),
    ("cpu:1", "rack == z", "no node matches constraint 'rack == z'"),
    ("cpu:4", "rack == a", "demand cpu:4 exceeds every eligible node (1 match the constraint)"),
])
def test_jobs_no_node_can_run_are_rejected_with_the_reason(demand, constraint, reason):
    nodes = [NodeSpec("a1", R("cpu:2"), {"rack": "a"}), NodeSpec("b1", R("cpu:8"), {"rack": "b"})]
    s = OnlineScheduler("tsf", ("cpu",), nodes)
    app, why = s.submit(AppSpec("x", R(demand), 3, constraint=C(constraint)))
    assert app is None and why == reason


# ----- invariants on random instances, every policy -----------------------------

def random_instance(rng: random.Random):
    dims = ("cpu", "mem")
    nodes = []
    for i in range(rng.randint(3, 12)):
        cap = R(f"cpu:{rng.choice([1, 2, 4, 8])};mem:{rng.choice([2, 4, 8, 16])}")
        nodes.append(NodeSpec(f"n{i}", cap, {"rack": rng.choice("ab"), "cores": cap["cpu"]}))
    constraints = ["", "rack == a", "rack != a", "cores >= 4", "rack in (a, b) and cores < 8"]
    apps = [AppSpec(f"j{k}", R(f"cpu:{rng.choice([0.5, 1, 2])};mem:{rng.choice([0.5, 1, 3])}"),
                    rng.randint(1, 30), weight=rng.choice([1, 1, 2]), submit=float(k),
                    constraint=C(rng.choice(constraints)))
            for k in range(rng.randint(2, 8))]
    return dims, nodes, apps


def order_key(s: OnlineScheduler, app, node):
    if s.policy.per_node:     # a policy reads views of the state (rm/core/views.py)
        return (s.policy.node_key(app.view, node.view, s.cluster.view), app.submit, app.app_id)
    return (s.policy.key(app.view), app.submit, app.app_id)


@pytest.mark.parametrize("policy", POLICY_NAMES)
@pytest.mark.parametrize("seed", range(12))
def test_invariants_hold_on_random_instances(policy, seed):
    rng = random.Random(seed)
    dims, nodes, apps = random_instance(rng)
    s = OnlineScheduler(policy, dims, nodes)
    cluster = s.cluster
    served_out_of_order = []
    real_allocate = cluster.allocate

    def checked_allocate(app, node, task=-1):
        # The app served must hold the least key among pending apps that may use the offered
        # node and fit it.  (Best fit may then place it on another node; the order is the same.)
        offered = node
        mine = order_key(s, app, offered)
        for other in cluster.apps.values():
            if other is app or other.pending <= 0 or not other.eligible[offered.index]:
                continue
            if cluster.fits(other, offered) and order_key(s, other, offered) < mine:
                served_out_of_order.append((app.app_id, other.app_id, offered.name))
        return real_allocate(app, node, task)

    if not s.policy.best_fit:
        cluster.allocate = checked_allocate
    accepted = [a for a in apps if s.submit(a)[0] is not None]
    running = deque(s.schedule())
    for _ in range(200):
        if not running:
            break
        s.release(running.popleft().container_id)
        running.extend(s.schedule())
        for node in cluster.nodes:
            used = [0.0] * len(node.capacity)
            for cid in node.containers:
                app = cluster.app_of(cid)
                assert app.spec.constraint.matches(node.name, node.attributes)
                for r, d in enumerate(app.demand):
                    used[r] += d
            assert all(u <= c + EPS for u, c in zip(used, node.capacity)), node.name
        # after every schedule(): no pending app fits anywhere it may run
        for app in cluster.apps.values():
            if app.pending > 0:
                assert not any(app.eligible[n.index] and cluster.fits(app, n) for n in cluster.nodes)
    assert served_out_of_order == []
    assert accepted, "every random instance accepts some app"


def test_lost_node_releases_its_containers_and_leaves_h():
    s = OnlineScheduler("tsf", ("cpu", "mem"), FIG4_NODES)
    for a in FIG4_APPS:
        s.submit(a)
    s.schedule()
    on_m3 = [cid for cid in s.cluster.nodes[2].containers]
    lost = s.remove_node("m3")
    assert sorted(c.container_id for c in lost) == sorted(on_m3)
    u1 = s.cluster.apps["u1"]
    # Without m3: u1's h = 6 (m1) + 2 (m2) = 8.
    assert u1.h == 8
    s.add_node(NodeSpec("m3", R("cpu:9;mem:12")))
    assert u1.h == 14


# ----- rejection: "no node could ever run it" counts lost nodes, not departed ones ------

def _ssd_cluster() -> OnlineScheduler:
    return OnlineScheduler("tsf", ("cpu", "memory_mb"), [
        NodeSpec("n1", Resources.parse("cpu:2;memory_mb:2048"), {"disk": "ssd"}),
        NodeSpec("n2", Resources.parse("cpu:2;memory_mb:2048"))])


def test_an_app_only_a_lost_node_can_run_waits_for_it():
    # n1, the one ssd node, is lost to a fault: s (2 tasks <cpu:1>, disk == ssd) is taken
    # and waits; n1 comes back and takes both (2 cpu / 1).
    s = _ssd_cluster()
    s.remove_nodes(["n1"])
    app, reason = s.submit(AppSpec("s", Resources.parse("cpu:1;memory_mb:512"), 2,
                                   constraint=Constraint.parse("disk == ssd")))
    assert reason is None and app.pending == 2
    assert s.schedule() == []
    s.add_nodes([NodeSpec("n1", Resources.parse("cpu:2;memory_mb:2048"), {"disk": "ssd"})])
    assert [(c.app_id, c.node) for c in s.schedule()] == [("s", "n1"), ("s", "n1")]
    # n2, the one node not ssd, lost too: an app only it can run waits for it as well
    s.remove_nodes(["n2"])
    assert s.submit(AppSpec("b", Resources.parse("cpu:2;memory_mb:512"), 1,
                            constraint=Constraint.parse("disk != ssd")))[1] is None


def test_an_app_only_a_departed_node_could_run_is_rejected():
    s = _ssd_cluster()
    s.remove_nodes(["n1"], departed=True)           # left the cluster for good
    ssd = Constraint.parse("disk == ssd")
    assert s.submit(AppSpec("s", Resources.parse("cpu:1"), 1, constraint=ssd)) == \
        (None, "no node matches constraint 'disk == ssd'")
    # n2 alone stands: <cpu:4> exceeds it; 1 node matches the (empty) constraint
    assert s.submit(AppSpec("w", Resources.parse("cpu:4"), 1)) == \
        (None, "demand cpu:4 exceeds every eligible node (1 match the constraint)")
    s.add_nodes([NodeSpec("n1", Resources.parse("cpu:2;memory_mb:2048"), {"disk": "ssd"})])
    assert s.submit(AppSpec("s", Resources.parse("cpu:1"), 1, constraint=ssd))[1] is None   # rejoined
