"""The victim search (rm/core/queues/victims.py) against the rule it implements, written out
plainly: on random clusters, every node the starved app may use is walked, and the node with
the fewest victims wins, then the newest oldest victim, then the lowest index.  The search
under test skips nodes by a lower bound on their rank, and is the compiled search
(_victims.choose_victims) under the native core; it must choose exactly the same."""

import random

import pytest

from rayrm.rm.core.config import parse_config
from rayrm.rm.core.model import EPS
from rayrm.rm.core.native import native_built
from rayrm.rm.core.queues.treeview import TreeView
from rayrm.rm.core.queues.scheduler import make_scheduler
from rayrm.rm.core.queues.victims import choose_victims

LEAVES = ["a", "b", "c"]


def scenario(seed: int, native: bool = False):
    """A random cluster filled by leaves a and c (and parent p of b and c), then b's app
    submitted with nothing free for it: (scheduler, stats, b's app)."""
    rng = random.Random(seed)
    nodes = [{"name": f"n{i}", "capacity": {"cpu": rng.choice([2, 4, 6, 8]),
                                            "memory_mb": rng.choice([2048, 4096, 8192])}}
             for i in range(rng.randint(3, 12))]
    jobs = []
    for j in range(rng.randint(3, 8)):
        jobs.append({"id": f"j{j}", "queue": rng.choice(["a", "p.c"]), "submit": 0, "tasks": rng.randint(2, 12),
                     "demand": {"cpu": rng.choice([1, 2]), "memory_mb": rng.choice([512, 1024, 2048])},
                     "duration": 100})
    jobs.append({"id": "starved", "queue": "p.b", "submit": 0, "tasks": 20,
                 "demand": {"cpu": rng.choice([1, 2, 3]), "memory_mb": rng.choice([1024, 2048, 3072])},
                 "duration": 100})
    cfg = parse_config({"cluster": {"nodes": nodes}, "policy": "tsf", "workload": {"jobs": jobs},
                        "queues": [{"name": "a", "weight": rng.choice([1, 2])},
                                   {"name": "p", "children": [{"name": "b"}, {"name": "c"}]}]})
    s = make_scheduler("tsf", cfg.dims, cfg.nodes, cfg.queues)
    for job in cfg.jobs[:-1]:
        s.submit(job.app)
    s.schedule()
    s.submit(cfg.jobs[-1].app)
    s.schedule()
    s.tree.track_usage()
    s.tree.track_pending()
    stats = TreeView(s.tree, native)
    stats.withhold([])
    return s, stats, s.cluster.apps["starved"]


def reference(stats, path, app, k):
    """The rule of victims.py's docstring, every node walked for every task."""
    tree, cluster = stats.tree, stats.cluster
    mine = {"p.b", "p"} if path == "p.b" else set()
    fair = {p: stats.fair.get(tree.by_path[p].name, 0.0) for p in stats.kept}
    usage = {p: list(u) for p, u in stats.kept.items()}
    over = {p: stats.frac(u) - fair[p] for p, u in usage.items()}
    items = {}
    for node in cluster.nodes:
        if node.alive and app.eligible[node.index]:
            mine_items = []
            for cid in node.containers:
                owner = cluster.holders[cid][0]
                member = tree.members[owner.app_id]
                source = member.path[0].spec.path
                if source != path and over[source] > EPS:
                    chain = [q.spec.path for q in member.path if q.spec.path not in mine]
                    mine_items.append((cid, owner, source, chain))
            mine_items.sort(key=lambda x: (-over[x[2]], -x[0]))
            items[node.index] = mine_items
    free = {m: list(cluster.nodes[m].free) for m in items}
    out = []
    for _ in range(k):
        found = []
        for m in sorted(items):
            room, taken, chosen = list(free[m]), {}, []
            fits = all(d <= f + EPS for d, f in zip(app.demand, room))
            for cid, owner, source, chain in items[m]:
                if fits:
                    break
                after = {p: [x - y for x, y in zip(taken.get(p, usage[p]), owner.demand)] for p in chain}
                if all(stats.frac(after[p]) >= fair[p] - EPS for p in chain):
                    taken.update(after)
                    chosen.append((cid, owner, source, chain))
                    room = [x + y for x, y in zip(room, owner.demand)]
                    fits = all(d <= f + EPS for d, f in zip(app.demand, room))
            if fits:
                found.append(((len(chosen), -min((c[0] for c in chosen), default=0)), m, chosen, room))
        if not found:
            break
        _, m, chosen, room = min(found, key=lambda x: (x[0], x[1]))
        free[m] = [x - d for x, d in zip(room, app.demand)]
        for item in chosen:
            items[m].remove(item)
            for p in item[3]:
                usage[p] = [x - y for x, y in zip(usage[p], item[1].demand)]
        if chosen:
            out.append([(cid, owner.app_id, source) for cid, owner, source, _ in chosen])
    return out


CORES = [False] + ([True] if native_built() else [])      # the compiled search too, when built


@pytest.mark.parametrize("native", CORES)
@pytest.mark.parametrize("seed", range(60))
def test_the_search_chooses_what_walking_every_node_chooses(seed, native):
    s, stats, app = scenario(seed, native)
    k = app.pending
    got = list(choose_victims(stats, "p.b", app, k, {}))
    assert got == reference(stats, "p.b", app, k)


def test_the_scenarios_preempt_at_all():
    # the comparison means something only if most scenarios do take victims
    taken = sum(bool(reference(stats, "p.b", app, app.pending))
                for stats, app in (scenario(seed)[1:] for seed in range(60)))
    assert taken >= 30
