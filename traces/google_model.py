"""The model behind the synthetic Google-like workload (tsf-paper §VI-B); see traces.generate.

Machines.  Drawn with replacement from the configuration mix of one Google cluster
(drfh-paper Table I, 12,583 servers, CPU and memory normalised to the largest
server), scaled so the largest server is ``MAX_SERVER`` = 16 cores / 64 GiB: a
(0.50, 0.25) server has 8 cores and 16,384 MB.  Each configuration belongs to one
of 4 machine classes (A: the common 0.5/0.5 server; B: memory-light; C:
memory-heavy; D: the full-size servers), shares 0.535 / 0.322 / 0.080 / 0.063.

Attributes and constraints (tsf-paper §VI-B after Sharma et al. [22]; choosy-paper
§7.1).  21 attributes ``a01``..``a21``; attribute k is *satisfied* by a fraction
q_k of machines, from q_1 = 100% down to q_21 = 7% as choosy-paper §7.1 reports.
Each attribute has a home class h_k where it is twice as common,
P(h_k) = min(1, 2 q_k), and the other classes carry the rest,
P(c) = (q_k − s_h P(h_k)) / (1 − s_h), so attributes are correlated through the
class as in the Google traces.  A job asks for each attribute through one clause
that holds exactly on the machines satisfying it; the clause kinds rotate through
``exists``, ``== 1``, ``>= 3``, ``in (v1, v2)`` and ``!= v0`` (where a machine without
the attribute also satisfies ``!=``).  A job is unconstrained with probability
P_NONE = 0.16 (half of those still name a01, which every machine has); otherwise it
asks for K ∈ {1, 2, 3, 4} of a02..a21 with P(K) = (0.50, 0.30, 0.15, 0.05) and adds
a01 with probability 0.33, so E[#constraints] = 0.16·0.5 + 0.84·(1.75 + 0.33) ≈ 1.83
(≈ 1.80 after the redraws below, which favour less constrained jobs).
These few numbers were tuned once so the eligible-machine fraction f_j = |{m :
constraint_j(m)}| / N matches the targets (< 20% of jobs with f = 1; ≈ 50% with
f ≤ 0.2; E[f] ≈ 0.38).  A job whose eligible machines cannot hold one task is
redrawn, so no job is rejected at submission; so is (for its first 1,000 draws) a job
whose eligible machines, with the cluster to itself, would need more than
MAX_WAVES = 100 waves to run its n_j tasks — Σ_{eligible m} floor(min_r C_mr / d_r) ≥
⌈n_j / 100⌉ — so no 282-task job is pinned to one machine for a day of trace time.

Job sizes (tsf-paper Fig. 8b and §VI-B3).  round(0.62 J) single-task jobs; jobs of
2..10 tasks up to round(0.86 J), with P(k) ∝ k^−1.5; the other ~14% are ≥ 11 tasks.
The largest job has round(T / 9) tasks (20,000 of 180,000 in the paper); the rest
follow a Pareto distribution bounded to [11, largest] whose shape is fitted so its
mean uses up the remaining tasks, then are stretched so the total is exactly T.

Durations.  Per job, Pareto with α = 1.9 (choosy-paper §6.2) and mean M_j =
s · LogNormal(0, 0.8); s is set so the offered CPU work Σ_j n_j · cpu_j · M_j is
``load`` × (cluster cores × the one-hour arrival span) — ``load`` = 1 by default:
the cluster is as busy as the paper's ("heavily loading the simulated cluster").

Demands.  cpu ∈ {0.25, 0.5, 1, 2, 4} cores with P = (0.10, 0.25, 0.40, 0.18, 0.07);
memory = cpu × LogNormal(ln 2 GiB, 0.6) per core, in 64 MB steps (≥ 128 MB) — below
the cluster's 3.6 GiB per core, so most jobs are CPU-bound as the Google workload is.

Arrivals.  Poisson over ``span`` = 3,600 s: sorted uniform submit times.

Knobs (``Knobs``; ``rayrm trace generate google --unconstrained/--rarity/--task-scale/
--heterogeneity``, and any of them a ``rayrm sweep`` grid axis).  Each changes one thing
and leaves every random draw where it was, so their defaults give the workload above
byte for byte:

* ``unconstrained`` (default P_NONE = 0.16): the share of jobs drawn with no restricting
  constraint, which run on any machine.  0 constrains every job; 1 none.
* ``rarity`` r (default 1): attribute k ≥ 2 is satisfied by q_k^r of the machines
  instead of q_k (a01 stays on all), so the jobs that are constrained fit fewer
  machines.  A job whose constraints then fit too few machines for its size is redrawn
  (above), and the redraws favour less constrained jobs, so r is best moved with
  ``unconstrained``: at 200 nodes and ``unconstrained`` 0, r = 2 takes the mean eligible
  fraction from 0.26 to 0.19 and the jobs on ≤ 20% of machines from 53% to 66%; at
  the default 0.16 the redrawn jobs that run anywhere make up for it.
* ``task_scale`` s (default 1): every task's CPU and memory demand times s (memory in
  64 MB steps, CPU choices 0.25 s .. 4 s): s = 4 makes a 4-core task a whole 16-core
  server, so whole tasks pack differently on machines (tsf-paper §IV: the task share
  n_i/h_i differs from the dominant share only where tasks fragment machines).  The
  durations are rescaled so the offered load stays ``load``.
* ``heterogeneity`` h ∈ [0, 1] (default 1): each machine's shape (c, m), normalised to
  the largest server, becomes (c̄ + h (c − c̄), m̄ + h (m − m̄)) with (c̄, m̄) = (0.5, 0.5)
  the common class-A server: h = 1 is drfh-paper Table I, h = 0 a cluster of identical
  8-core / 32 GiB servers.  Attributes and classes are unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rayrm.rm.core.constraints import Clause
from rayrm.rm.core.errors import InputError

MAX_SERVER = {"cpu": 16.0, "memory_mb": 65536.0}
DIMS = ("cpu", "memory_mb")

# drfh-paper Table I: (servers, cpu, memory) normalised to the largest server; class.
MACHINE_MIX = [
    (6732, 0.50, 0.50, "A"), (3863, 0.50, 0.25, "B"), (1001, 0.50, 0.75, "C"),
    (795, 1.00, 1.00, "D"), (126, 0.25, 0.25, "B"), (52, 0.50, 0.12, "B"),
    (5, 0.50, 0.03, "B"), (5, 0.50, 0.97, "C"), (3, 1.00, 0.50, "D"), (1, 0.50, 0.06, "B"),
]
CLASSES = ("A", "B", "C", "D")

# q_k: fraction of machines satisfying attribute k (choosy-paper §7.1: 100% .. 7-8%).
ATTR_FREQ = (1.00, 0.92, 0.85, 0.80, 0.72, 0.65, 0.58, 0.52, 0.45, 0.40, 0.34,
             0.30, 0.26, 0.22, 0.19, 0.16, 0.14, 0.12, 0.10, 0.08, 0.07)
ATTR_HOME = (0, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 3, 2, 1, 2)
HOME_BOOST = 2.0
ATTRS = tuple(f"a{k + 1:02d}" for k in range(len(ATTR_FREQ)))
KINDS = ("exists", "eq", "ge", "in", "ne")

P_NONE = 0.16                       # jobs with no restricting constraint
K_DIST = (0.50, 0.30, 0.15, 0.05)   # P(K = 1..4 restricting constraints)
P_UNIVERSAL = 0.33                  # a constrained job also names a01

P_SINGLE, P_SMALL = 0.62, 0.86      # tsf-paper Fig. 8b: 1 task; <= 10 tasks
BIG_MIN = 11
LARGEST_FRACTION = 1 / 9            # 20k of 180k tasks (tsf-paper §VI-B3)
ALPHA = 1.9                         # choosy-paper §6.2
MAX_WAVES = 100                     # a job's eligible machines hold >= n_j / 100 tasks at once
CPU_CHOICES = ((0.25, 0.5, 1.0, 2.0, 4.0), (0.10, 0.25, 0.40, 0.18, 0.07))
COMMON_SHAPE = (0.50, 0.50)         # class A, the server heterogeneity shrinks the others towards


@dataclass(frozen=True)
class Knobs:
    """The generator's dials beyond size and load (module docstring, "Knobs"); the
    defaults are the calibrated workload."""

    unconstrained: float = P_NONE
    rarity: float = 1.0
    task_scale: float = 1.0
    heterogeneity: float = 1.0

    def __post_init__(self):
        for name, lo, hi in (("unconstrained", 0.0, 1.0), ("rarity", 0.0, math.inf),
                             ("task_scale", 0.0, math.inf), ("heterogeneity", 0.0, 1.0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi \
                    or not math.isfinite(v) or (v == 0 and name in ("rarity", "task_scale")):
                bounds = f"in [{lo:g}, {hi:g}]" if math.isfinite(hi) else "positive"
                raise InputError(f"must be a number {bounds}, got {v!r}", field="--" + name.replace("_", "-"))

    def changed(self) -> dict[str, float]:
        """The knobs away from their defaults, by name."""
        return {k: getattr(self, k) for k in ("unconstrained", "rarity", "task_scale", "heterogeneity")
                if getattr(self, k) != getattr(Knobs, k)}


# ----- machines ------------------------------------------------------------------

def class_attribute_probs(rarity: float = 1.0) -> np.ndarray:
    """P[c, k]: probability a class-c machine satisfies attribute k (home-class model),
    attribute k satisfied by q_k^rarity of machines."""
    counts = np.zeros(len(CLASSES))
    for n, _, _, c in MACHINE_MIX:
        counts[CLASSES.index(c)] += n
    share = counts / counts.sum()
    probs = np.zeros((len(CLASSES), len(ATTR_FREQ)))
    for k, (q, h) in enumerate(zip(ATTR_FREQ, ATTR_HOME)):
        q = q if rarity == 1 else q ** rarity
        ph = min(1.0, HOME_BOOST * q, q / share[h])
        probs[:, k] = max(0.0, (q - share[h] * ph) / (1 - share[h]))
        probs[h, k] = ph
    return probs


def _attr_value(k: int, has: bool, cls: int):
    """The attribute value a machine carries (None: absent), so clause k holds iff ``has``."""
    kind = "exists" if k == 0 else KINDS[k % len(KINDS)]
    if kind == "exists":
        return 1 if has else None
    if kind == "eq":
        return 1 if has else 0
    if kind == "ge":
        return (3 if has else 1) + cls % 2
    if kind == "in":
        return f"v{1 + cls % 2}" if has else "v0"
    return (None if cls % 2 else "v2") if has else "v0"          # ne


def attribute_clause(k: int) -> Clause:
    """The clause a job uses to ask for attribute k (true exactly where ``_attr_value`` has it)."""
    kind = "exists" if k == 0 else KINDS[k % len(KINDS)]
    name = ATTRS[k]
    return {"exists": Clause(name, "exists"), "eq": Clause(name, "==", ("1",)),
            "ge": Clause(name, ">=", ("3",)), "in": Clause(name, "in", ("v1", "v2")),
            "ne": Clause(name, "!=", ("v0",))}[kind]


def machine_shape(index: int, heterogeneity: float = 1.0) -> tuple[float, float]:
    """(cpu, memory) of MACHINE_MIX[index] normalised to the largest server, moved towards
    COMMON_SHAPE: c̄ + h (c − c̄) (module docstring, "Knobs")."""
    _, c, m, _ = MACHINE_MIX[index]
    if heterogeneity == 1:
        return c, m
    return tuple(a + heterogeneity * (x - a) for x, a in zip((c, m), COMMON_SHAPE))


def machine_capacity(index: int, heterogeneity: float = 1.0) -> tuple[float, int]:
    """(cores, MB) of one machine: its shape times MAX_SERVER, memory rounded to 1 MB."""
    c, m = machine_shape(index, heterogeneity)
    return c * MAX_SERVER["cpu"], round(m * MAX_SERVER["memory_mb"])


def draw_machines(nodes: int, rng: np.random.Generator, rarity: float = 1.0):
    """(config index per machine, class per machine, satisfied-attribute matrix N×21)."""
    weights = np.array([m[0] for m in MACHINE_MIX], dtype=float)
    config = rng.choice(len(MACHINE_MIX), size=nodes, p=weights / weights.sum())
    cls = np.array([CLASSES.index(MACHINE_MIX[i][3]) for i in config], dtype=int)
    satisfied = rng.random((nodes, len(ATTR_FREQ))) < class_attribute_probs(rarity)[cls]
    return config, cls, satisfied


def node_groups(config, cls, satisfied, heterogeneity: float = 1.0) -> list[dict]:
    """``cluster.nodes`` groups m0001..mNNNN; consecutive identical machines share a group."""
    width = max(4, len(str(len(config))))
    mask = satisfied.astype(np.int64) @ (1 << np.arange(satisfied.shape[1], dtype=np.int64))
    order = np.lexsort((mask, config))
    groups: list[dict] = []
    prev = None
    for i in order:
        key = (int(config[i]), int(mask[i]))
        if key == prev:
            groups[-1]["count"] += 1
            continue
        prev = key
        cpu, mem = machine_capacity(int(config[i]), heterogeneity)
        attrs = {}
        for k in range(len(ATTR_FREQ)):
            v = _attr_value(k, bool(satisfied[i, k]), int(cls[i]))
            if v is not None:
                attrs[ATTRS[k]] = v
        start = 1 + sum(g["count"] for g in groups)
        groups.append({"name": f"m{{i:0{width}d}}", "start": start, "count": 1,
                       "capacity": {"cpu": _num(cpu), "memory_mb": mem},
                       "attributes": attrs})
    return groups


def _num(x: float):
    return int(x) if float(x).is_integer() else float(x)


# ----- job sizes -----------------------------------------------------------------

def _bounded_pareto(u: np.ndarray, shape: float, lo: float, hi: float) -> np.ndarray:
    """Inverse CDF of the Pareto(shape) truncated to [lo, hi]: lo (1 − u(1 − (lo/hi)^a))^(−1/a)."""
    return lo * (1 - u * (1 - (lo / hi) ** shape)) ** (-1 / shape)


def _fit_shape(mean: float, lo: float, hi: float) -> float:
    """The shape a whose truncated Pareto on [lo, hi] has ``mean`` (bisection; the mean falls with a)."""
    grid = (np.arange(4000) + 0.5) / 4000
    a, b = 0.01, 20.0
    for _ in range(50):
        mid = (a + b) / 2
        a, b = (mid, b) if _bounded_pareto(grid, mid, lo, hi).mean() > mean else (a, mid)
    return (a + b) / 2


def _stretch_to_sum(raw: np.ndarray, total: int, lo: int, hi: int) -> np.ndarray:
    """Integers in [lo, hi] summing to ``total``: x = clip(lo + s (raw − lo)), s by bisection."""
    def sized(s: float) -> np.ndarray:
        return np.clip(lo + s * (raw - lo), lo, hi)
    a, b = 0.0, 1.0
    while sized(b).sum() < total and b < 1e12:
        b *= 2
    for _ in range(100):
        mid = (a + b) / 2
        a, b = (mid, b) if sized(mid).sum() < total else (a, mid)
    x = sized(b)
    out = np.floor(x).astype(np.int64)
    order = np.argsort(-(x - out), kind="stable")        # largest fractional parts first
    while out.sum() < total:
        for i in order:
            if out.sum() >= total:
                break
            if out[i] < hi:
                out[i] += 1
    return out


def job_sizes(jobs: int, tasks: int, rng: np.random.Generator) -> np.ndarray:
    """Tasks per job, shuffled: the tsf-paper Fig. 8b mix (see the module docstring), Σ = tasks."""
    if tasks == jobs:
        return np.ones(jobs, dtype=np.int64)
    n_big = max(1, jobs - round(P_SMALL * jobs))
    n_small = jobs - n_big
    n_single = min(n_small, round(P_SINGLE * jobs))
    k = np.arange(2, BIG_MIN)
    mid = rng.choice(k, size=n_small - n_single, p=k ** -1.5 / (k ** -1.5).sum())
    rest = tasks - n_single - int(mid.sum())
    if rest < BIG_MIN * n_big:
        raise InputError(f"{tasks} tasks are too few for {jobs} jobs in the paper's size mix "
                         f"(62% single-task, 86% with <= 10, the rest >= {BIG_MIN}): give at least "
                         f"{tasks - rest + BIG_MIN * n_big}", field="--tasks")
    if n_big == 1:
        big = np.array([rest])
    else:
        largest = max(min(round(tasks * LARGEST_FRACTION), rest - BIG_MIN * (n_big - 1)),
                      math.ceil(rest / n_big))
        others = rest - largest
        if largest <= BIG_MIN:
            raw = np.full(n_big - 1, float(BIG_MIN))
        else:
            shape = _fit_shape(others / (n_big - 1), BIG_MIN, largest)
            raw = _bounded_pareto(rng.random(n_big - 1), shape, BIG_MIN, largest)
        big = np.concatenate([[largest], _stretch_to_sum(raw, others, BIG_MIN, largest)])
    sizes = np.concatenate([np.ones(n_single, dtype=np.int64), mid, big]).astype(np.int64)
    rng.shuffle(sizes)
    return sizes


# ----- constraints and demands ---------------------------------------------------

def draw_required(rng: np.random.Generator, unconstrained: float = P_NONE) -> list[int]:
    """Attribute indices one job asks for (0 is a01, which every machine satisfies);
    none restricting with probability ``unconstrained``."""
    if rng.random() < unconstrained:
        return [0] if rng.random() < 0.5 else []
    k = 1 + int(rng.choice(len(K_DIST), p=K_DIST))
    req = sorted(int(a) for a in 1 + rng.choice(len(ATTR_FREQ) - 1, size=k, replace=False))
    return ([0] if rng.random() < P_UNIVERSAL else []) + req


def draw_demand(rng: np.random.Generator, task_scale: float = 1.0) -> tuple[float, int]:
    """(cpu cores, memory MB) of one task (CPU-bound on average; see the module docstring),
    both times ``task_scale``."""
    cpu = float(rng.choice(CPU_CHOICES[0], p=CPU_CHOICES[1]))
    cpu = cpu if task_scale == 1 else cpu * task_scale
    gib_per_core = math.exp(rng.normal(math.log(2.0), 0.6))
    return cpu, max(128, 64 * round(cpu * gib_per_core * 1024 / 64))
