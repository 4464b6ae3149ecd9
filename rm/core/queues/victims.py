"""The search for preemption victims, node by node (``rayrm.rm.core.queues.preemption``).

For one task of demand d of the starved leaf L's app: on each node m the app may use,
walk the running containers of other leaves that are above their fair share — the leaf
furthest above (u_q − F_q at the decision) first, newest first (highest container id)
within a leaf — and take each one whose leaf, and every ancestor of it that
is not an ancestor of L, keeps u_q ≥ F_q without it and without the containers already
warned (dominant shares of the cluster),
until free_m + Σ victims' demand ≥ d in every resource.  Of the nodes where that
succeeds, the one with the fewest victims wins, then the one whose oldest victim is newest
(so equal nodes give their newest containers first), then the lowest index (YARN's
FSPreemptionThread.identifyContainersToPreemptOnNode checks a node at a time likewise).
The chosen victims' usage leaves their queues before the next task is searched, and the
task is counted as placed on its node.
"""

from __future__ import annotations

import bisect
import math
from typing import Iterator

import numpy as np

from rayrm.rm.core.model import EPS
from rayrm.rm.core.native import compiled


def choose_victims(stats, path: str, app, k: int, warned) -> Iterator[list[tuple[int, str, str]]]:
    """Up to ``k`` lists of victims (container, app id, source leaf path), one per task of
    ``app`` (leaf ``path``); fewer when no node can be freed for another task.  Under the
    compiled core (``stats.native``) ``_victims.choose_victims``, the same search."""
    if stats.native:
        yield from compiled("_victims").choose_victims(stats, path, app, k, warned)
        return
    tree, cluster = stats.tree, stats.cluster
    # a leaf's usage less its warned containers is no larger than its usage, so none is
    # above its share when none is by its usage: no source, without counting what is kept
    fair_of = stats.fair
    if all(stats.dominant(p) - fair_of.get(q.name, 0.0) <= EPS
           for p, q in tree.by_path.items() if not q.children and p != path):
        return
    kept = stats.kept           # usage less the victims already warned: they are going
    fair = {p: stats.fair.get(tree.by_path[p].name, 0.0) for p in kept}
    over = {p: stats.frac(u) - fair[p] for p, u in kept.items()}
    floor = {p: f - EPS for p, f in fair.items()}
    sources = _sources(stats, path, kept, over, floor)
    if not sources:
        return
    by_node = _takeable(cluster, app, sources, warned)
    usage = {p: list(u) for p, u in kept.items()}
    free = {m: list(cluster.nodes[m].free) for m in by_node}
    walked: set[int] = set()            # the nodes whose items are in walk order
    # the nodes best-first by a lower bound on the rank they can reach (_bound), the lowest
    # index first among equals: a node whose bound is not below the best (rank, index) found
    # cannot win, nor can any after it
    order = sorted((b, m) for m, items in by_node.items() if (b := _bound(app.demand, free[m], items)))
    for _ in range(k):
        best = None
        for bound, m in order:
            if best is not None and (bound, m) >= (best[3], best[0]):
                break
            items = by_node[m]
            if m not in walked:         # the leaf furthest above its share first, newest first in it
                items.sort(key=lambda x: (-over[x[2]], -x[0]))
                walked.add(m)
            chosen = _on_node(items, app.demand, free[m], usage, floor, stats.frac)
            if chosen is not None:
                rank = (len(chosen[0]), -min((x[0] for x in chosen[0]), default=0))
                if best is None or (rank, m) < (best[3], best[0]):
                    best = (m, chosen[0], chosen[1], rank, bound)
        if best is None:
            return
        m, chosen, room, _, bound = best
        free[m] = [x - d for x, d in zip(room, app.demand)] + list(room[len(app.demand):])
        for item in chosen:
            by_node[m].remove(item)
            for p in item[3]:
                u = usage[p]
                for r, d in enumerate(item[1].demand):
                    u[r] -= d
        del order[bisect.bisect_left(order, (bound, m))]
        bound = _bound(app.demand, free[m], by_node[m])
        if bound:
            bisect.insort(order, (bound, m))
        if chosen:                  # none: room already, the scheduler places it there
            yield [(cid, owner.app_id, source) for cid, owner, source, _ in chosen]


def _sources(stats, path: str, kept: dict, over: dict, floor: dict) -> dict[str, tuple[str, list]]:
    """Each running app of a leaf above its share (not ``path``'s) one of whose containers
    could go alone -> (its leaf, the queues it must keep at F: its leaf and ancestors, but
    those of ``path``).  Most searches end here, cheaply."""
    tree = stats.tree
    mine = set()
    q = tree.by_path[path]
    while q is not tree.root:
        mine.add(q.spec.path)
        q = tree._parent(q)
    sources = {}
    index, frac = tree.index, stats.frac
    for source, q in tree.by_path.items():
        if q.children or source == path or over[source] <= EPS:
            continue
        chain = []                                  # the leaf's queues (its apps' Member.path)
        while q is not tree.root:
            if q.spec.path not in mine:
                chain.append(q.spec.path)
            q = tree._parent(q)
        held = [(kept[p], floor[p]) for p in chain]
        verdicts: dict[tuple, bool] = {}            # by demand: the leaf's apps share a few
        for owner in index.items_in(tree.by_path[source].mask):        # the leaf's apps
            if not owner.running:
                continue
            d = owner.demand
            ok = verdicts.get(d)
            if ok is None:
                ok = verdicts[d] = all(frac([u - x for u, x in zip(u_p, d)]) >= f_p for u_p, f_p in held)
            if ok:
                sources[owner.app_id] = (source, chain)
    return sources


def _takeable(cluster, app, sources: dict, warned) -> dict[int, list]:
    """Per node the starved app may use, its containers of ``sources``' apps not warned yet:
    (container, its app, source leaf, the queues it must keep at F)."""
    by_node: dict[int, list] = {}
    holders, containers, nodes = cluster.holders, cluster.containers, cluster.nodes
    for m in np.flatnonzero(np.frombuffer(app.eligible, dtype=np.uint8)).tolist():
        node = nodes[m]
        if not node.alive:
            continue
        items = []
        for cid in node.containers:
            found = sources.get(containers[cid].app_id)
            if found is not None and cid not in warned:
                items.append((cid, holders[cid][0], found[0], found[1]))
        if items:
            by_node[m] = items
    return by_node


def _bound(demand, room, items) -> tuple[int, int] | None:
    """A lower bound on the rank (victims, −the oldest victim's id) a node can reach, None
    when it cannot make room for ``demand`` at all.  It needs at least c = ``_fewest``
    victims, and the oldest of c or more of its containers is no newer than the c-th newest
    of them all."""
    if not items:
        return (0, 0) if _fits(demand, room) else None
    c = _fewest(demand, room, items)
    if c > len(items):
        return None
    if c == 0:
        return (0, 0)
    return c, -sorted((item[0] for item in items), reverse=True)[c - 1]


def _fewest(demand, room, items) -> float:
    """A lower bound on the victims among ``items`` that make ``room`` fit ``demand``: per
    resource short of it, the fewest containers whose demands, largest first, cover the
    shortfall (with a little slack for the order floats are added in; inf: none can)."""
    n = 0
    for r, (d, f) in enumerate(zip(demand, room)):
        short = d - f - EPS
        if short > 0:
            enough = short * (1 - 1e-9) - 1e-9
            got, j = 0.0, 0
            for x in sorted((item[1].demand[r] for item in items), reverse=True):
                if got >= enough or x <= 0:
                    break
                got += x
                j += 1
            if got < enough:
                return math.inf
            n = max(n, j)
    return n


def _on_node(items, demand, room, usage, floor, frac) -> tuple[list, list] | None:
    """The newest-first victims on one node that make room for ``demand`` (and the room
    then), None when the node's takeable containers cannot (``floor``: F_q − EPS, each
    source queue's least share after a kill; ``frac``: the share of a usage vector)."""
    room = list(room)
    chosen: list = []
    if _fits(demand, room):
        return chosen, room
    taken: dict[str, list[float]] = {}
    for item in items:
        d = item[1].demand
        after = []
        for p in item[3]:
            v = [x - y for x, y in zip(taken.get(p) or usage[p], d)]
            if frac(v) < floor[p]:
                break
            after.append((p, v))
        else:
            taken.update(after)
            chosen.append(item)
            for r, x in enumerate(d):
                room[r] += x
            if _fits(demand, room):
                return chosen, room
    return None


def _fits(demand, room) -> bool:
    for d, f in zip(demand, room):
        if d > f + EPS:
            return False
    return True
