"""Where the logical NodeManagers live: which Ray node hosts each NM.

Ray nodes are read once from ``ray.nodes()`` (alive ones, the head first).  Each
NM goes to a Ray node chosen in two steps:

1. **Labels.**  A Ray node's custom labels (``ray start --labels disk=ssd``; keys
   under ``ray.io/`` are Ray's own and ignored) are compared with the NM's
   attributes.  A Ray node whose label has the attribute's name but another value
   is excluded; among the rest, those agreeing on the most attributes win.  With
   no labels anywhere every Ray node ties.
2. **Balance.**  Among the winners, the Ray node with the fewest NMs per CPU
   (ties: order of ``ray.nodes()``), so NMs spread evenly over the cluster.

One NodeManager host actor then runs on each Ray node that got NMs
(``NodeAffinitySchedulingStrategy(soft=False)``), and its containers run there too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

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
