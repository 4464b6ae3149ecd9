"""A seeded nemesis: ``--chaos SEED[:RATE]`` draws a schedule of faults of every kind.

As Jepsen's nemesis, it throws faults at a run at random times, overlapping where chance
makes them overlap; unlike a hand-written list it covers every kind
(``rayrm.rm.core.faults``): partitions, slow and lossy links, and the kills and stalls.
The schedule is a function of the seed and the run's shape alone (``ChaosShape``), and
it is written as ``--fault`` specs, so copying them replays it exactly.

The count: a Poisson number with mean RATE × the trace's length in hours (the default
RATE gives about one fault per ``DEFAULT_SPACING`` trace seconds, at least
``MIN_FAULTS``), times uniform over [0, the trace's earliest end).  What keeps the trace
able to finish:

* an app loses at most ``max_attempts`` − 1 counted attempts (``kill-am`` on it, or a
  partition of its AM host longer than the AM expiry); a draw that would pass it is
  drawn again as another kind;
* each NM host is killed at most ``NM_HOST_RESTARTS`` − 1 times, the AM hosts together
  ``AM_HOST_RESTARTS`` − 1 times per host, the RM ``RM_RESTARTS`` − 1 times;
* ``kill-ray-node`` only on a multi-node cluster, once, never node 0;
* a slow link adds less than half the expiry (so a call is late, not lost) and a lossy
  one loses at most ``MAX_DROP`` of the calls.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from rayrm.rm.core.config import MIN_EXPIRY_WALL
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.fault_rules import expiry
from rayrm.rm.core.faults import Fault, am_host_of, earliest_end, parse_fault

DEFAULT_SPACING = 300.0       # trace seconds per fault by default
MIN_FAULTS = 3
MAX_DROP = 0.3
NM_HOST_RESTARTS = 3          # as rm/runtime/supervisor.py: Ray restarts of one host actor
AM_HOST_RESTARTS = 3
RM_RESTARTS = 5               # as rm/runtime/actor.py RM_MAX_RESTARTS


@dataclass(frozen=True)
class ChaosSpec:
    """``--chaos SEED[:RATE]``: the seed, and faults per trace hour (None: the default)."""

    seed: int
    rate: float | None = None


def parse_chaos(text: str) -> ChaosSpec:
    """A ChaosSpec from ``SEED[:RATE]``; an InputError says what is wrong."""
    seed, _, rate = str(text).strip().partition(":")
    if not seed.isdigit():
        raise InputError(f"--chaos {text!r}: write SEED[:RATE], SEED a whole number >= 0")
    if not rate:
        return ChaosSpec(int(seed))
    try:
        r = float(rate)
    except ValueError:
        raise InputError(f"--chaos {text!r}: RATE (faults per trace hour) must be a number, got {rate!r}") from None
    if not (math.isfinite(r) and r > 0):
        raise InputError(f"--chaos {text!r}: RATE (faults per trace hour) must be > 0, got {rate!r}")
    return ChaosSpec(int(seed), r)


@dataclass(frozen=True)
class ChaosShape:
    """What a schedule is drawn for: the trace's earliest end and expiries (trace seconds),
    the wall seconds per trace second, the NMs, apps (app -> AM host index), hosts and Ray
    nodes, and ``max_attempts``."""

    horizon: float
    nm_expiry: float
    am_expiry: float
    time_scale: float
    nodes: tuple[str, ...]
    am_host_of: dict
    nm_hosts: int
    am_hosts: int
    ray_nodes: int
    max_attempts: int


def default_rate(horizon: float) -> float:
    """Faults per trace hour by default: max(MIN_FAULTS, horizon / DEFAULT_SPACING) over the trace."""
    hours = max(horizon, 1.0) / 3600.0
    return max(MIN_FAULTS, horizon / DEFAULT_SPACING) / hours


def draw_schedule(spec: ChaosSpec, shape: ChaosShape) -> list[Fault]:
    """The faults of ``spec`` for a run of ``shape``, by time (module docstring)."""
    rng = random.Random(spec.seed)
    rate = spec.rate if spec.rate is not None else default_rate(shape.horizon)
    count = _poisson(rng, rate * max(shape.horizon, 1.0) / 3600.0)
    budget = {a: shape.max_attempts - 1 for a in shape.am_host_of}
    kills = {"nm-host": [NM_HOST_RESTARTS - 1] * max(1, shape.nm_hosts),
             "am-host": (AM_HOST_RESTARTS - 1) * max(1, shape.am_hosts), "rm": RM_RESTARTS - 1,
             "ray-node": 1 if shape.ray_nodes > 1 else 0}
    out = []
    for _ in range(count):
        t = round(rng.uniform(0.0, max(shape.horizon, 1.0)), 1)
        for _attempt in range(20):                       # a kind the budgets still allow
            text = _one(rng, t, shape, budget, kills)
            if text:
                out.append(parse_fault(text))
                break
    return sorted(out, key=lambda f: (f.time, f.text))


def _poisson(rng: random.Random, mean: float) -> int:
    """Knuth's method; a normal approximation above 50."""
    if mean > 50:
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))
    limit, k, p = math.exp(-mean), 0, rng.random()
    while p > limit:
        k += 1
        p *= rng.random()
    return k


KINDS = ("partition-nm-host", "partition-am-host", "slow-nm-host", "slow-am-host", "drop", "kill-nm",
         "kill-nm-host", "kill-am", "kill-am-host", "kill-rm", "kill-ray-node", "stall-rm")


def _one(rng: random.Random, t: float, shape: ChaosShape, budget: dict, kills: dict) -> str:
    """One fault spec at ``t``, or "" when the kind drawn is out of budget."""
    kind = rng.choice(KINDS)
    e_nm, e_am = shape.nm_expiry, shape.am_expiry
    if kind in ("partition-nm-host", "slow-nm-host", "kill-nm-host"):
        i = rng.randrange(max(1, shape.nm_hosts))
        if kind == "partition-nm-host":
            return f"{kind}:{i}@{t:g}+{round(rng.uniform(0.5, 3.0) * e_nm, 1):g}"
        if kind == "slow-nm-host":
            return f"{kind}:{i}@{t:g}+{round(rng.uniform(1.0, 3.0) * e_nm, 1):g}:{_slow_ms(rng, e_nm, shape):g}"
        if kills["nm-host"][i] <= 0:
            return ""
        kills["nm-host"][i] -= 1
        return f"{kind}:{i}@{t:g}"
    if kind in ("partition-am-host", "slow-am-host", "kill-am-host"):
        i = rng.randrange(max(1, shape.am_hosts))
        apps = [a for a, h in shape.am_host_of.items() if h == i]
        if kind == "slow-am-host":
            return f"{kind}:{i}@{t:g}+{round(rng.uniform(1.0, 3.0) * e_am, 1):g}:{_slow_ms(rng, e_am, shape):g}"
        if kind == "kill-am-host":                     # not counted against max_attempts
            if kills["am-host"] <= 0:
                return ""
            kills["am-host"] -= 1
            return f"{kind}:{i}@{t:g}"
        d = round(rng.uniform(0.5, 3.0) * e_am, 1)
        if d > e_am and any(budget[a] <= 0 for a in apps):
            return ""
        for a in apps if d > e_am else ():
            budget[a] -= 1
        return f"{kind}:{i}@{t:g}+{d:g}"
    if kind == "drop":
        return f"drop:{round(rng.uniform(0.02, MAX_DROP), 2):g}@{t:g}+{round(rng.uniform(1.0, 3.0) * e_nm, 1):g}"
    if kind == "kill-nm":
        return f"kill-nm:{rng.choice(shape.nodes)}@{t:g}" if shape.nodes else ""
    if kind == "kill-am":
        open_ = sorted(a for a, left in budget.items() if left > 0)
        if not open_:
            return ""
        app = rng.choice(open_)
        budget[app] -= 1
        return f"kill-am:{app}@{t:g}"
    if kind == "stall-rm":
        return f"stall-rm:{round(rng.uniform(0.2, 2.0), 1):g}@{t:g}"
    key = "rm" if kind == "kill-rm" else "ray-node"
    if kills[key] <= 0:
        return ""
    kills[key] -= 1
    return "kill-rm@" + f"{t:g}" if kind == "kill-rm" else f"kill-ray-node:{rng.randrange(1, shape.ray_nodes)}@{t:g}"


def _slow_ms(rng: random.Random, expiry_trace: float, shape: ChaosShape) -> float:
    """A slow link's delay, wall ms: up to half the expiry (a call late, never lost)."""
    half_ms = 500.0 * expiry_trace * shape.time_scale
    return max(1.0, round(rng.uniform(0.1, 1.0) * half_ms))


def shape_of(cfg, time_scale: float, nm_hosts: int, am_hosts: int, ray_nodes: int,
             until: float | None = None) -> ChaosShape:
    """The ChaosShape of a replay of config ``cfg``: its horizon is ``until`` or the trace's
    earliest end (``faults.earliest_end``); the expiries as the replay's RM computes them."""
    run = cfg.run
    floor = MIN_EXPIRY_WALL / time_scale
    return ChaosShape(horizon=until if until is not None else earliest_end(cfg),
                      nm_expiry=expiry(run.nm_expiry, run.heartbeat_interval, floor),
                      am_expiry=expiry(run.am_expiry, run.heartbeat_interval, floor),
                      time_scale=time_scale, nodes=tuple(n.name for n in cfg.nodes),
                      am_host_of=am_host_of(cfg.apps, am_hosts), nm_hosts=nm_hosts, am_hosts=am_hosts,
                      ray_nodes=ray_nodes, max_attempts=run.max_attempts)
