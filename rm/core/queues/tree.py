"""The queue tree of a config: what each queue is owed and may hold, validated once.

::

    policy: tsf                 # orders root's children, and any queue without its own policy
    queues:                     # children of root; jobs go to leaves; absent: one leaf root.default
      - name: eng               # [A-Za-z0-9_-]+, unique among siblings; full name root.eng
        weight: 2               # a positive number (default 1)
        children:
          - {name: batch, max: {cpu: 60%}}
          - {name: adhoc, min: {cpu: 10, memory_mb: 40960}, max_apps: 20}
      - {name: research, policy: drf, user_limit: 0.5}

* ``min`` / ``max``: resource name -> an amount or a percentage of the cluster's total
  (``"60%"``); a queue below its min with a task that fits is offered a node first, and
  a queue never holds more than its max (docs/design.md, "Queues").
* ``max_apps``: at most this many of the subtree's apps running at once (an app runs from
  its first container to its end; the others wait, as YARN's maxRunningApps).
* ``user_limit`` (0, 1]: the largest fraction of the queue's resources (its max, else the
  cluster) one user's apps hold.
* ``policy``: orders the queue's children (its apps, for a leaf).
* For YARN's Capacity Scheduler: ``capacity`` (percent of the parent; siblings' sum to 100
  when any sets one) means weight c and min c% of the parent's absolute capacity unless
  ``weight``/``min`` are given; ``max_capacity`` (percent of the parent's) means the max;
  ``user_limit_factor`` (> 0) and ``min_user_limit_percent`` (0, 100] are kept for it.
* ``preemption``: ``min_share_timeout``, ``fair_share_timeout`` (positive seconds),
  ``fair_share_threshold`` ([0, 1]), kept for the Fair Scheduler's preemption.

Errors name the field, e.g. ``queues[0].children[1].weight: must be positive, got 0``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.fields import integer, listing, mapping, number
from rayrm.rm.core.model import DEFAULT_QUEUE, queue_path
from rayrm.rm.core.policies import PolicyError
from rayrm.rm.core.policies.plugins import resolve_policy

NAME = re.compile(r"[A-Za-z0-9_-]+\Z")
MAX_DEPTH = 32
KEYS = {"name", "weight", "children", "policy", "min", "max", "max_apps", "user_limit", "capacity",
        "max_capacity", "user_limit_factor", "min_user_limit_percent", "preemption"}
PREEMPTION_KEYS = ("min_share_timeout", "fair_share_timeout", "fair_share_threshold")


@dataclass(frozen=True)
class Amount:
    """One resource's min or max: ``value`` units, or ``value`` percent of the cluster's total."""

    value: float
    percent: bool = False

    def of(self, total: float) -> float:
        return total * self.value / 100 if self.percent else self.value

    def __str__(self) -> str:
        return f"{self.value:g}%" if self.percent else f"{self.value:g}"


@dataclass(frozen=True)
class QueueSpec:
    """One queue as configured; ``path`` is its name below root (``eng.batch``; root: "")."""

    name: str
    path: str
    weight: float = 1.0
    policy: str | None = None
    min: tuple[tuple[str, Amount], ...] = ()
    max: tuple[tuple[str, Amount], ...] = ()
    max_apps: int | None = None
    user_limit: float | None = None
    capacity: float | None = None
    max_capacity: float | None = None
    user_limit_factor: float | None = None
    min_user_limit_percent: float | None = None
    preemption: tuple[tuple[str, float], ...] = ()
    children: tuple["QueueSpec", ...] = ()

    @property
    def full_name(self) -> str:
        return f"root.{self.path}" if self.path else "root"

    @property
    def is_leaf(self) -> bool:
        return not self.children and bool(self.path)

    def to_dict(self) -> dict:
        """The queue as the config would write it (the run directory's queues.json)."""
        out: dict[str, Any] = {"name": self.name, "weight": self.weight}
        for key in ("policy", "max_apps", "user_limit", "capacity", "max_capacity", "user_limit_factor",
                    "min_user_limit_percent"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        for key in ("min", "max"):
            if getattr(self, key):
                out[key] = {d: (str(a) if a.percent else a.value) for d, a in getattr(self, key)}
        if self.preemption:
            out["preemption"] = dict(self.preemption)
        if self.children:
            out["children"] = [c.to_dict() for c in self.children]
        return out


@dataclass(frozen=True)
class QueueTree:
    """The root queue and the config's policy; ``flat``: the config gave no ``queues:``."""

    root: QueueSpec
    flat: bool = True
    by_path: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self):
        stack = [self.root]
        while stack:
            q = stack.pop()
            self.by_path[q.path] = q
            stack.extend(q.children)

    def queues(self) -> list[QueueSpec]:
        """Every queue, parents before their children, siblings in config order."""
        out, stack = [], [self.root]
        while stack:
            q = stack.pop()
            out.append(q)
            stack.extend(reversed(q.children))
        return out

    def leaf(self, name: str) -> tuple[QueueSpec | None, str | None]:
        """The leaf a job's ``queue`` names, or (None, why a job cannot go there)."""
        q = self.by_path.get(queue_path(name))
        if q is None:
            return None, f"queue root.{queue_path(name)} does not exist"
        if not q.is_leaf:
            return None, f"queue {q.full_name} is a parent queue (jobs go to leaf queues)"
        return q, None

    def to_list(self) -> list[dict]:
        return [c.to_dict() for c in self.root.children]


def default_tree() -> QueueTree:
    """A config without ``queues:``: one leaf, root.default."""
    return QueueTree(QueueSpec("root", "", children=(QueueSpec(DEFAULT_QUEUE, DEFAULT_QUEUE),)))


def parse_queues(value: Any, dims: tuple[str, ...], total: dict[str, float], where: str = "queues") -> QueueTree:
    """The tree a ``queues:`` list gives (None: ``default_tree()``); ``total`` is the cluster's
    capacity per resource at the start, against which min and max are compared."""
    if value is None:
        return default_tree()
    children = _children(value, where, "", dims, set(), 0)
    if not children:
        raise InputError("needs at least one queue", field=where)
    root = QueueSpec("root", "", children=children)
    _check_bounds(root, where, total, 1.0, 1.0)
    return QueueTree(root, flat=False)


def _children(value: Any, where: str, parent: str, dims, seen: set, depth: int) -> tuple[QueueSpec, ...]:
    if depth > MAX_DEPTH:
        raise InputError(f"queues nest at most {MAX_DEPTH} deep", field=where)
    if id(value) in seen:                 # a YAML alias naming one of its own ancestors
        raise InputError("a queue contains itself (a cycle through a YAML alias)", field=where)
    items = listing(value, where)
    out, names = [], set()
    for k, raw in enumerate(items):
        q = _queue(raw, f"{where}[{k}]", parent, dims, seen | {id(value)}, depth)
        if q.name in names:
            raise InputError(f"queue name {q.name!r} is used twice among siblings", field=f"{where}[{k}].name")
        names.add(q.name)
        out.append(q)
    capacities = [q.capacity for q in out if q.capacity is not None]
    if capacities and (len(capacities) != len(out) or abs(sum(capacities) - 100) > 1e-6):
        given = " + ".join(f"{q.capacity:g}" if q.capacity is not None else "(none)" for q in out)
        raise InputError(f"sibling capacities must sum to 100, got {given}", field=f"{where}[*].capacity")
    return tuple(out)


def _queue(raw: Any, where: str, parent: str, dims, seen: set, depth: int) -> QueueSpec:
    raw = mapping(raw, where)
    unknown = set(raw) - KEYS
    if unknown:
        raise InputError(f"unknown key(s) {', '.join(sorted(map(str, unknown)))}", field=where)
    name = raw.get("name")
    if not isinstance(name, (str, int)) or isinstance(name, bool) or not NAME.match(str(name)):
        raise InputError(f"a queue name is letters, digits, '_' and '-', got {name!r}", field=f"{where}.name")
    name = str(name)
    path = f"{parent}.{name}" if parent else name
    capacity = _percent(raw.get("capacity"), f"{where}.capacity", allow_zero=True)
    max_capacity = _percent(raw.get("max_capacity"), f"{where}.max_capacity")
    if "weight" not in raw and capacity == 0:
        raise InputError("capacity 0 needs a weight of its own (a queue's weight is positive)",
                         field=f"{where}.capacity")
    weight = raw.get("weight", capacity if capacity is not None else 1)
    weight = number(weight, f"{where}.weight", positive=True)
    policy = raw.get("policy")
    if policy is not None:
        policy = str(policy)
        try:
            resolve_policy(policy)
        except PolicyError as e:
            raise InputError(str(e), field=f"{where}.policy") from None
    user_limit = _optional(raw, "user_limit", where, lambda v, w: _fraction(v, w, open_zero=True))
    children = ()
    if raw.get("children") is not None:
        children = _children(raw["children"], f"{where}.children", path, dims, seen, depth + 1)
    return QueueSpec(
        name, path, weight, policy,
        _amounts(raw.get("min"), f"{where}.min", dims), _amounts(raw.get("max"), f"{where}.max", dims),
        _optional(raw, "max_apps", where, lambda v, w: integer(v, w, minimum=1)), user_limit,
        capacity, max_capacity,
        _optional(raw, "user_limit_factor", where, lambda v, w: number(v, w, positive=True)),
        _optional(raw, "min_user_limit_percent", where, lambda v, w: _percent(v, w)),
        _preemption(raw.get("preemption"), f"{where}.preemption"), children)


def _optional(raw: dict, key: str, where: str, read):
    return None if raw.get(key) is None else read(raw[key], f"{where}.{key}")


def _percent(value: Any, where: str, allow_zero: bool = False) -> float | None:
    """A percentage in (0, 100] ([0, 100] with ``allow_zero``), written 60 or "60%"."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().endswith("%"):
        value = value.strip()[:-1]
    x = number(value, where)
    if x > 100:
        raise InputError(f"a percentage is at most 100, got {x:g}", field=where)
    if x < 0 or (x == 0 and not allow_zero):
        raise InputError(f"must be {'non-negative' if allow_zero else 'positive'}, got {x:g}", field=where)
    return x


def _fraction(value: Any, where: str, open_zero: bool) -> float:
    x = number(value, where)
    if x > 1 or x < 0 or (open_zero and x == 0):
        raise InputError(f"must be in {'(0' if open_zero else '[0'}, 1], got {x:g}", field=where)
    return x


def _amounts(value: Any, where: str, dims) -> tuple[tuple[str, Amount], ...]:
    if value is None:
        return ()
    out = []
    for d, v in mapping(value, where).items():
        d = str(d)
        if d not in dims:
            raise InputError(f"unknown resource (the config's are {', '.join(dims)})", field=f"{where}.{d}")
        if isinstance(v, str) and v.strip().endswith("%"):
            out.append((d, Amount(_percent(v, f"{where}.{d}", allow_zero=True), percent=True)))
        else:
            out.append((d, Amount(number(v, f"{where}.{d}", non_negative=True))))
    return tuple(out)


def _preemption(value: Any, where: str) -> tuple[tuple[str, float], ...]:
    if value is None:
        return ()
    raw = mapping(value, where)
    out = []
    for k, v in raw.items():
        if k not in PREEMPTION_KEYS:
            raise InputError(f"unknown setting (known: {', '.join(PREEMPTION_KEYS)})", field=f"{where}.{k}")
        w = f"{where}.{k}"
        out.append((k, _fraction(v, w, open_zero=False) if k == "fair_share_threshold"
                    else number(v, w, positive=True)))
    return tuple(out)


def _check_bounds(q: QueueSpec, where: str, total: dict[str, float], share: float, max_share: float) -> None:
    """min <= max in every resource, against the cluster at the start (``share``: the queue's
    absolute capacity as a fraction of the cluster, ``max_share`` its max_capacity's)."""
    for k, (c, c_share, c_max) in enumerate(child_shares(q, share, max_share)):
        w = f"{where}[{k}]"
        lo, hi = resolve_bounds(c, total, c_share, c_max)
        for d in lo:
            if d in hi and lo[d] > hi[d] + 1e-9:
                raise InputError(f"min {lo[d]:g} is above max {hi[d]:g}", field=f"{w}.min.{d}")
        _check_bounds(c, f"{w}.children", total, c_share, c_max)


def child_shares(q: QueueSpec, share: float, max_share: float) -> list[tuple[QueueSpec, float, float]]:
    """Each child c of ``q`` with its absolute capacity g_c and max capacity as fractions of
    the cluster, from ``q``'s (``share``, ``max_share``), as the Capacity Scheduler's
    "absolute capacity": g_c = g_q · capacity_c / 100, or g_q · W_c / Σ_siblings W for a child
    that sets no capacity (its weight's part); max: max_share · max_capacity_c / 100, or
    ``q``'s own when it sets none."""
    weights = sum(c.weight for c in q.children)
    return [(c, share * (c.capacity / 100 if c.capacity is not None else c.weight / weights),
             max_share * c.max_capacity / 100 if c.max_capacity is not None else max_share)
            for c in q.children]


def resolve_bounds(q: QueueSpec, total: dict[str, float], share: float | None = None,
                   max_share: float | None = None) -> tuple[dict[str, float], dict[str, float]]:
    """(min, max) of a queue in absolute amounts per resource, for a cluster of ``total``:
    its own ``min``/``max``, else what its capacity (``share`` of the cluster) and
    max_capacity (``max_share``) imply; a resource absent from max is unbounded."""
    lo = {d: a.of(total.get(d, 0.0)) for d, a in q.min}
    hi = {d: a.of(total.get(d, 0.0)) for d, a in q.max}
    if not q.min and q.capacity is not None and share is not None:
        lo = {d: share * t for d, t in total.items()}
    if not q.max and q.max_capacity is not None and max_share is not None:
        hi = {d: max_share * t for d, t in total.items()}
    return lo, hi


@dataclass(frozen=True)
class Bounds:
    """One queue's min and max for a cluster: absolute amounts per resource (a resource
    absent from ``hi`` is unbounded), and as fractions of the cluster — ``m`` = max_r
    min_r / T_r over the resources min names (0 if none), ``big`` = min_r max_r / T_r over
    those max names (1 if none)."""

    lo: dict
    hi: dict
    m: float
    big: float


def tree_bounds(tree: QueueTree, total: dict[str, float]) -> dict[str, Bounds]:
    """path -> :class:`Bounds` of every queue (root: none), capacities followed down the tree."""
    out: dict[str, Bounds] = {"": Bounds({}, {}, 0.0, 1.0)}

    def walk(q: QueueSpec, share: float, max_share: float) -> None:
        for c, cs, cm in child_shares(q, share, max_share):
            lo, hi = resolve_bounds(c, total, cs, cm)
            out[c.path] = Bounds(lo, hi, max((v / total[x] for x, v in lo.items() if total.get(x)), default=0.0),
                                 min((v / total[x] for x, v in hi.items() if total.get(x)), default=1.0))
            walk(c, cs, cm)

    walk(tree.root, 1.0, 1.0)
    return out
