"""Where the logical NodeManagers and the hosts live: which Ray node hosts each NM, and
what becomes of a host whose Ray node is gone.

Ray nodes are read once from ``ray.nodes()`` (alive ones, the head first).  Each
NM goes to a Ray node chosen in two steps:

1. **Labels.**  A Ray node's custom labels (``ray start --labels disk=ssd``; keys
   under ``ray.io/`` are Ray's own and ignored) are compared with the NM's
   attributes.  A Ray node whose label has the attribute's name but another value
   is excluded; among the rest, those agreeing on the most attributes win.  With
   no labels anywhere every Ray node ties.
2. **Balance.**  Among the winners, the Ray node with the fewest NMs per CPU
   (ties: order of ``ray.nodes()``), so NMs spread evenly over the cluster.

A Ray node that offers no CPU (a head started with ``--num-cpus 0``, as Ray advises for
a head that should run only the driver and its services) gets no NM while another node
offers CPUs: its NMs' containers would have no CPU to run on.

One NodeManager host actor then runs on each Ray node that got NMs
(``NodeAffinitySchedulingStrategy(soft=False)``), and its containers run there too.

**Hosts whose Ray node is gone.**  Ray restarts a dead host actor (``max_restarts``) on the node it is pinned to
(``NodeAffinitySchedulingStrategy(soft=False)``).  Once Ray has declared that node dead —
its raylet killed, the machine gone, or its link silent for longer than Ray's health
check (``health_check_period_ms`` × ``health_check_failure_threshold``, docs/failures.md)
— there is nowhere to restart it: Ray fails the actor and every call on it with
``ActorUnschedulableError`` (or ``ActorDiedError``), which is not a ``RayActorError``.
The driver then treats the host as the fault rules treat a lost Ray node:

* **a NodeManager host**: its NMs are lost for good (``Supervisor._host_lost``), as for
  ``kill-ray-node``; their containers are lost and their tasks run again on the other NMs;
* **an ApplicationMaster host**: made again with the same jobs on the live Ray node with
  CPUs that holds the fewest AM hosts (the driver's node when none has CPUs), which is
  what Ray's restart would have done on the old node; the RM fails its attempts without
  counting them and launches new ones on it, as for ``kill-am-host``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

from rayrm.rm.core.model import NodeSpec


@dataclass(frozen=True)
class RayNode:
    node_id: str
    address: str
    cpus: float
    labels: Mapping[str, str] = field(default_factory=dict)
    is_head: bool = False

    @property
    def custom_labels(self) -> dict[str, str]:
        return {k: v for k, v in self.labels.items() if not k.startswith("ray.io/")}


def alive_ray_nodes() -> list[RayNode]:
    """The Ray cluster's live nodes, the head (the driver's node when it is the head) first."""
    import ray  # noqa: PLC0415
    here = ray.get_runtime_context().get_node_id()
    out = []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        res = n.get("Resources", {})
        out.append(RayNode(n["NodeID"], n.get("NodeManagerAddress", ""), float(res.get("CPU", 0.0)),
                           dict(n.get("Labels") or {}), bool(n.get("IsHeadNode")) or n["NodeID"] == here))
    out.sort(key=lambda r: (not r.is_head, r.node_id != here, r.address, r.node_id))
    return out


def lost_ray_nodes(planned: list[RayNode]) -> list[RayNode]:
    """The nodes of ``planned`` that Ray no longer lists alive."""
    alive = {r.node_id for r in alive_ray_nodes()}
    return [r for r in planned if r.node_id not in alive]


def label_score(spec: NodeSpec, ray_node: RayNode) -> int | None:
    """How many of the NM's attributes the Ray node's labels agree on; None on a conflict."""
    labels = ray_node.custom_labels
    score = 0
    for key, value in spec.attributes.items():
        if key in labels:
            if str(labels[key]) != _label_text(value):
                return None
            score += 1
    return score


def _label_text(value) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def place_nodes(specs: list[NodeSpec], ray_nodes: list[RayNode]) -> dict[str, RayNode]:
    """Assign every NM to a Ray node (see the module docstring)."""
    if not ray_nodes:
        raise RuntimeError("the Ray cluster has no live nodes")
    ray_nodes = [r for r in ray_nodes if r.cpus > 0] or ray_nodes
    load = {r.node_id: 0 for r in ray_nodes}
    order = {r.node_id: i for i, r in enumerate(ray_nodes)}
    out = {}
    for spec in specs:
        scored = [(label_score(spec, r), r) for r in ray_nodes]
        ok = [(s, r) for s, r in scored if s is not None] or [(0, r) for r in ray_nodes]
        best = max(s for s, _ in ok)
        cands = [r for s, r in ok if s == best]
        pick = min(cands, key=lambda r: ((load[r.node_id] + 1) / max(r.cpus, 1.0), order[r.node_id]))
        load[pick.node_id] += 1
        out[spec.name] = pick
    return out


#: seconds to wait for Ray to free a dead AM host's name before giving up
NAME_FREED_WITHIN = 10.0


def host_gone_errors() -> tuple:
    """The errors of a call on a host actor that died, or that Ray cannot restart."""
    import ray  # noqa: PLC0415
    return ray.exceptions.RayActorError, ray.exceptions.ActorUnschedulableError


def dead_ray_nodes() -> set[str]:
    """The ids of the Ray nodes the cluster has declared dead."""
    import ray  # noqa: PLC0415
    return {n["NodeID"] for n in ray.nodes() if not n.get("Alive")}


@dataclass
class Homes:
    """Each AM host's Ray node, and how an AM host is made again elsewhere."""

    am: dict[str, str]                        # "am-I" -> Ray node id
    make_am_host: Callable | None = None      # (I, Ray node id) -> a new AM host am-I there
    am_of_app: dict = field(default_factory=dict)   # app -> its AM host (updated on a move)
    moves: list[dict] = field(default_factory=list)  # each AM host made again: from, to, wall

    def am_node_gone(self, hid: str) -> bool:
        return self.am.get(hid) in dead_ray_nodes()

    def rehome_am_host(self, hid: str, old):
        """AM host ``hid`` made again on a live Ray node (module docstring); returns it."""
        import ray  # noqa: PLC0415
        try:
            ray.kill(old, no_restart=True)              # frees its name for the new one
        except Exception:  # noqa: BLE001 - already gone
            pass
        alive = alive_ray_nodes()
        nodes = [r.node_id for r in alive if r.cpus > 0 and r.node_id != self.am.get(hid)] or [alive[0].node_id]
        load = {n: sum(1 for h, r in self.am.items() if r == n and h != hid) for n in nodes}
        target = min(nodes, key=lambda n: (load[n], nodes.index(n)))
        deadline = time.time() + NAME_FREED_WITHIN
        while True:
            try:
                new = self.make_am_host(int(hid.split("-")[1]), target)
                break
            except ValueError:                         # the old actor's name is not free yet
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        self.moves.append({"host": hid, "from": self.am.get(hid), "to": target, "wall": time.time()})
        self.am[hid] = target
        for app, handle in list(self.am_of_app.items()):
            if handle is old:
                self.am_of_app[app] = new
        return new


def where_figures(hosted: dict, am_nodes: list[str], ray_nodes: list, driver_node: str,
                  moves: list[dict], nm_hosts_lost: set[str]) -> dict:
    """summary.json's record of where the replay ran: the Ray nodes (id -> address), the
    driver's (and the RM's) node, each host's node, NMs per node; and, when Ray lost a
    node under the replay, the NM hosts lost with it and the AM hosts made again elsewhere."""
    out = {"ray_nodes": len(hosted), "nm_hosts": len(hosted), "am_hosts": len(am_nodes),
           "am_host_ray_nodes": {f"am-{i}": rid for i, rid in enumerate(am_nodes)},
           "nm_per_ray_node": {rid: len(specs) for rid, specs in hosted.items()},
           "nm_host_ray_nodes": {f"nm-{i}": rid for i, rid in enumerate(hosted)},
           "ray_node_addresses": {r.node_id: r.address for r in ray_nodes},
           "driver_ray_node": driver_node}
    moves = [{k: m[k] for k in ("host", "from", "to")} for m in moves]
    if moves or nm_hosts_lost:
        out["hosts_lost_with_ray_nodes"] = {"nm_hosts_lost": sorted(nm_hosts_lost), "am_hosts_moved": moves}
    return out
