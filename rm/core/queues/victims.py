"""The search for preemption victims, node by node (``rayrm.rm.core.queues.preemption``).

For one task of demand d of the starved leaf L's app: on each node m the app may use,
walk the running containers of other leaves that are above their fair share, newest
first (highest container id), and take each one whose leaf, and every ancestor of it that
is not an ancestor of L, keeps u_q ≥ F_q without it (dominant shares of the cluster),
until free_m + Σ victims' demand ≥ d in every resource.  Of the nodes where that
succeeds, the one with the fewest victims wins, then the one whose oldest victim is newest
(so equal nodes give their newest containers first), then the lowest index (YARN's
FSPreemptionThread.identifyContainersToPreemptOnNode checks a node at a time likewise).
The chosen victims' usage leaves their queues before the next task is searched, and the
task is counted as placed on its node.
"""

from __future__ import annotations

from typing import Iterator

from rayrm.rm.core.model import EPS


def choose_victims(stats, path: str, app, k: int, warned) -> Iterator[list[tuple[int, str, str]]]:
    """Up to ``k`` lists of victims (container, app id, source leaf path), one per task of
    ``app`` (leaf ``path``); fewer when no node can be freed for another task."""
    tree, cluster = stats.tree, stats.cluster
    mine = set()
    q = tree.by_path[path]
    while q is not tree.root:
        mine.add(q.spec.path)
        q = tree._parent(q)
    fair = {p: stats.fair.get(tree.by_path[p].name, 0.0) for p in stats.usage}
    by_node: dict[int, list] = {}
    holders, members = cluster.holders, tree.members
    for cid in cluster.containers:
        if cid in warned:
            continue
        owner, node = holders[cid]
        member = members.get(owner.app_id)
        if member is None:
            continue
        source = member.path[0].spec.path
        if source == path or stats.dominant(source) <= fair[source] + EPS:
            continue
        chain = [x.spec.path for x in member.path if x.spec.path not in mine]
        by_node.setdefault(node.index, []).append((cid, owner, source, chain))
    for items in by_node.values():
        items.sort(key=lambda x: -x[0])
    usage = {p: list(u) for p, u in stats.usage.items()}
    free = {}
    for _ in range(k):
        best = None
        for m in sorted(by_node):
            node = cluster.nodes[m]
            if not node.alive or not app.eligible[m]:
                continue
            room = free.get(m) or list(node.free)
            chosen = _on_node(by_node[m], app.demand, room, usage, fair, stats)
            if chosen is not None:
                rank = (len(chosen[0]), -min((x[0] for x in chosen[0]), default=0))
                if best is None or rank < best[3]:
                    best = (m, chosen[0], chosen[1], rank)
        if best is None:
            return
        m, chosen, room, _ = best
        free[m] = [x - d for x, d in zip(room, app.demand)] + list(room[len(app.demand):])
        if not chosen:              # room already: the scheduler places it, nothing to take
            continue
        for item in chosen:
            by_node[m].remove(item)
            for p in item[3]:
                u = usage[p]
                for r, d in enumerate(item[1].demand):
                    u[r] -= d
        yield [(cid, owner.app_id, source) for cid, owner, source, _ in chosen]


def _on_node(items, demand, room, usage, fair, stats) -> tuple[list, list] | None:
    """The newest-first victims on one node that make room for ``demand`` (and the room
    then), None when the node's takeable containers cannot."""
    room = list(room)
    taken: dict[str, list[float]] = {}
    chosen = []
    if _fits(demand, room):
        return chosen, room
    for item in items:
        cid, owner, source, chain = item
        d = owner.demand
        after = {}
        for p in chain:
            u = taken.get(p) or usage[p]
            after[p] = [x - y for x, y in zip(u, d)]
            if stats.frac(after[p]) < fair[p] - EPS:
                break
        else:
            taken.update(after)
            chosen.append(item)
            for r, x in enumerate(d):
                room[r] += x
            if _fits(demand, room):
                return chosen, room
    return None


def _fits(demand, room) -> bool:
    return all(d <= f + EPS for d, f in zip(demand, room))
