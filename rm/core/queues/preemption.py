"""Preemption on the queue tree, YARN's way: clock-free rules both drivers apply.

Settings (a config's top-level ``preemption:``; per-queue overrides in the tree's
``preemption:``, inherited down it as Hadoop's allocation file inherits them)::

    preemption: {enabled: true, min_share_timeout: 30, fair_share_timeout: 60,
                 fair_share_threshold: 0.5, grace: 15}

Hadoop's Fair Scheduler documentation ("Hadoop: Fair Scheduler", the
allocation file: ``minSharePreemptionTimeout``, ``fairSharePreemptionTimeout``,
``fairSharePreemptionThreshold``; yarn-site ``yarn.scheduler.fair.preemption`` and
``yarn.scheduler.fair.waitTimeBeforeKill``) gives the rule, per leaf queue L at time t:

* **starved for its min share** since s_min when, from s_min on, L holds less than its
  min in every resource its ``min`` names (max_r U_Lr / min_Lr < 1, the tree's needy
  test) *and* has a pending task it could place (an app with pending tasks and an
  eligible node);
* **starved for its fair share** since s_fair when, from s_fair on, its share
  u_L = max_r U_Lr / T_r (r over the resources the scheduler compares queues on,
  ``QueueTreeState.share_resources``: all of them under TSF, memory under YARN's
  schedulers) is below θ_L · F_L (θ: ``fair_share_threshold``) with such a
  pending task.  F_L is the *instantaneous* fair share: the root's 1 divided down the
  tree among the active children (those with demand) by ``fairshare.fair_shares``, child
  c bounded by lo_c = min(m_c, hi_c) and hi_c = min(M_c, δ_c), its min and max as
  fractions of the cluster and its demand share δ_c = max_r (U_cr + P_cr) / T_r (P: its
  pending tasks' demand), as YARN's ComputeFairShares over active queues;
* it **may preempt** once t − s_min ≥ ``min_share_timeout`` (target: its min, capped by
  its demand) or t − s_fair ≥ ``fair_share_timeout`` (target: F_L).  A timeout not set
  is infinite (YARN's default is Long.MAX_VALUE: that kind of preemption is off).

The number of containers L asks back is k = ⌈(target − u_L) / s_i⌉ (s_i: the dominant
share of one task of the app L serves first), at most its pending tasks, less the tasks
already covered by victims warned for it and still running.  Each task's victims are
found node by node (YARN's FSPreemptionThread): on each node the app may use, the
running containers of *other* leaves above their fair share, the leaf furthest above
(u − F) first and newest first (highest container id) within it, each taken only if its
leaf — and every ancestor of it that is not an ancestor of L — stays at or above its own
fair share without it and without the victims already warned (by this evaluation's earlier
leaves too) and still running, until the node's free resources plus the victims' fit one
task; the node needing the fewest victims wins (ties: the newest victims, then the lowest
node index; ``rayrm.rm.core.queues.victims``).
A victim is warned now and killed at now + ``grace`` unless it
finished first; its task is asked for again as a new attempt.  After a search, found or
not, the leaf's next one waits ``grace`` (YARN's FSAppAttempt.preemptionTriggered: an app
that triggered preemption is not checked for starvation again before the kills are due).


Under ``yarn-capacity`` the same rule set runs with each queue's weight its capacity, so
F_L is ProportionalCapacityPreemptionPolicy's *ideal assignment* (guaranteed capacity,
the idle queues' guarantee handed out in proportion to capacity, capped by max-capacity
and demand).  A documented simplification: ``total_preemption_per_round`` = 1,
``natural_termination_factor`` = 1 and ``max_ignored_over_capacity`` = 0, and a queue
below its ideal assignment waits ``fair_share_timeout`` (threshold θ) as the Fair
Scheduler's does (the Capacity Scheduler's monitor acts on its next round).

A leaf's *starvation episode* runs from the first instant it is starved (either kind
whose timeout is set) to the first instant it is not; ``episodes`` keeps each (queue, start, end): the time
from starvation to share restored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.fields import mapping, number
from rayrm.rm.core.model import EPS
from rayrm.rm.core.native import compiled, core_name
from rayrm.rm.core.queues.tree import QueueSpec, QueueTree
from rayrm.rm.core.queues.treeview import TreeView
from rayrm.rm.core.queues.victims import choose_victims

INF = math.inf
#: trace seconds between two evaluations of the rules (YARN's yarn.scheduler.fair.update-interval-ms,
#: 500 ms: the Fair Scheduler recomputes fair shares and starvation that often)
UPDATE_INTERVAL = 0.5
SETTINGS = ("enabled", "min_share_timeout", "fair_share_timeout", "fair_share_threshold", "grace")


@dataclass(frozen=True)
class PreemptionConfig:
    """The ``preemption:`` settings (module docstring); defaults are YARN's: timeouts
    infinite, threshold 0.5, grace 15 s (waitTimeBeforeKill)."""

    enabled: bool = False
    min_share_timeout: float = INF
    fair_share_timeout: float = INF
    fair_share_threshold: float = 0.5
    grace: float = 15.0

    @classmethod
    def parse(cls, doc: Any, where: str = "preemption") -> "PreemptionConfig":
        """Validated settings: a timeout or grace not a positive number, a threshold outside
        [0, 1], an unknown key is an InputError naming ``where.<key>``."""
        if doc is None:
            return cls()
        raw = mapping(doc, where)
        out = {}
        for k, v in raw.items():
            w = f"{where}.{k}"
            if k not in SETTINGS:
                raise InputError(f"unknown setting (known: {', '.join(SETTINGS)})", field=w)
            if k == "enabled":
                if not isinstance(v, bool):
                    raise InputError(f"must be true or false, got {v!r}", field=w)
                out[k] = v
            elif k == "fair_share_threshold":
                x = number(v, w)
                if not 0 <= x <= 1:
                    raise InputError(f"must be in [0, 1], got {x:g}", field=w)
                out[k] = x
            else:
                out[k] = number(v, w, positive=True)
        return cls(**out)

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in SETTINGS if getattr(self, k) != INF}


def check_preemption(config: PreemptionConfig, queues: QueueTree, policy: str) -> None:
    """Preemption on where it cannot apply: no queue tree, or a policy without rayrm's queues."""
    if not config.enabled:
        return
    if queues.flat:
        raise InputError("preemption takes containers between queues: it needs a queue tree (queues:)",
                         field="preemption.enabled")
    if policy == "ray-native":
        raise InputError("ray-native schedules without rayrm's queues: it cannot preempt", field="preemption.enabled")


class Victim(NamedTuple):
    """A container taken back: from leaf ``source`` for starved leaf ``starved`` (full
    queue names), killed at trace time ``deadline`` unless it finished first."""

    container: int
    app: str
    source: str
    starved: str
    deadline: float


class LeafClocks:
    """The leaves' starvation clocks, the rules' state between evaluations (module
    docstring): per leaf i, since when it has been below its min (``since_min``), below θ·F
    (``since_fair``) and starved (``since``: its open episode's start), and the time before
    which it searches no victims (``next_search``).  The compiled core's is
    ``_fairshare.LeafClocks``, the same tests in the same order on the view's C doubles.

    ``leaves``: per leaf (path, full name, min_share_timeout, fair_share_timeout, θ).
    """

    def __init__(self, leaves: list[tuple[str, str, float, float, float]]):
        self.leaves = leaves
        self.since_min: dict[int, float] = {}
        self.since_fair: dict[int, float] = {}
        self.since: dict[int, float] = {}
        self.next_search: dict[int, float] = {}

    def scan(self, now: float, stats: TreeView, episodes: list) -> list[tuple[int, float]]:
        """Move every leaf's clocks to ``now`` (an episode that ends is appended to
        ``episodes``); the leaves that may preempt now, each with its target share, in leaf
        order.  A kind of starvation counts only where its timeout is set (only then can it
        preempt); a leaf is starved only with a task it could place (asked last: it walks
        the leaf's apps)."""
        out = []
        fair = stats.fair
        for i, (path, name, t_min, t_fair, theta) in enumerate(self.leaves):
            below_min = t_min < INF and stats.min_ratio(path) < 1 - EPS
            below_fair = t_fair < INF and stats.dominant(path) < theta * fair.get(name, 0.0) - EPS
            if not (below_min or below_fair) or not stats.placeable(path):
                if i in self.since:         # the episode ends, both clocks with it
                    self.since_min.pop(i, None)
                    self.since_fair.pop(i, None)
                    episodes.append((name, self.since.pop(i), now))
                continue
            self.since.setdefault(i, now)
            if below_min:
                self.since_min.setdefault(i, now)
            else:
                self.since_min.pop(i, None)
            if below_fair:
                self.since_fair.setdefault(i, now)
            else:
                self.since_fair.pop(i, None)
            target = -INF
            if below_min and now - self.since_min[i] >= t_min - EPS:
                target = max(target, min(stats.min_share(path), stats.demand_share(path)))
            if below_fair and now - self.since_fair[i] >= t_fair - EPS:
                target = max(target, fair.get(name, 0.0))
            if target != -INF and now >= self.next_search.get(i, -INF) - EPS:
                out.append((i, target))
        return out

    def searched(self, leaf: int, until: float) -> None:
        """Leaf ``leaf`` searched for victims: its next search waits till ``until``."""
        self.next_search[leaf] = until

    def wake_after(self, now: float) -> float:
        """The earliest clock expiry after ``now`` (inf: none): a timeout of a clock that
        runs, or a starved leaf's next search."""
        times = [since + self.leaves[i][2] for i, since in self.since_min.items()]
        times += [since + self.leaves[i][3] for i, since in self.since_fair.items()]
        times += [t for i, t in self.next_search.items() if i in self.since]
        return min((t for t in times if t > now), default=INF)

    def starved(self) -> dict[int, float]:
        """The starved leaves and their episodes' starts."""
        return dict(self.since)

    def end_all(self) -> None:
        """The run ended: no leaf is starved any more (``Preemption.close`` ended the episodes)."""
        self.since.clear()


class Preemption:
    """The preemption rules of a run (module docstring), held by the scheduler's owner.

    ``decide(now, scheduler)`` reads the scheduler's tree at trace time ``now`` (the
    drivers call it after each scheduling round and at ``wake()``) and returns the new
    victims, each warned once; it changes nothing in the scheduler.  It evaluates at most
    once per ``UPDATE_INTERVAL`` of trace time, as YARN's update thread; a call sooner
    returns nothing and ``wake()`` then names the time of the next evaluation.  Its own bookkeeping
    is the starvation clocks and the victims still running: a victim whose container left
    the scheduler (finished, killed, lost) is forgotten at the next ``decide``.
    """

    def __init__(self, config: PreemptionConfig, tree: QueueTree):
        self.config = config
        self.settings: dict[str, PreemptionConfig] = {}
        self._inherit(tree.root, config)
        self._names = {path: _full(path) for path in self.settings}     # leaf path -> full name
        self._paths = list(self.settings)                                # leaf index -> path
        self._native = core_name() == "native"              # the core that runs: its view and clocks
        clocks = compiled("_fairshare").LeafClocks if self._native else LeafClocks
        self.clocks = clocks([(path, self._names[path], cfg.min_share_timeout, cfg.fair_share_timeout,
                               cfg.fair_share_threshold) for path, cfg in self.settings.items()])
        self.episodes: list[tuple[str, float, float]] = []
        self.warned: dict[int, tuple[Victim, int]] = {}     # container -> (victim, its task group)
        self.groups: dict[str, dict[int, int]] = {}         # leaf -> task group -> live victims
        self._group = 0
        self._last = -INF                                   # the last evaluation
        self._skipped = False                               # a call since then was not evaluated
        self.fair: dict[str, float] = {}                    # the last decide's F_q, by full name

    def _inherit(self, q: QueueSpec, parent: PreemptionConfig) -> None:
        own = replace(parent, **dict(q.preemption)) if q.preemption else parent
        if q.is_leaf:
            self.settings[q.path] = own
        for c in q.children:
            self._inherit(c, own)

    # ----- the decision ----------------------------------------------------------

    def decide(self, now: float, scheduler) -> list[Victim]:
        """The containers to take back at ``now`` (new victims only; module docstring)."""
        tree = getattr(scheduler, "tree", None)
        if tree is None or not self.config.enabled:
            return []
        if now < self._last + UPDATE_INTERVAL - EPS:
            self._skipped = True
            return []
        self._last, self._skipped = now, False
        running = self._forget_ended(scheduler.cluster.containers)
        tree.track_usage()
        tree.track_pending()
        stats = TreeView(tree, self._native)
        stats.withhold(running)
        self.fair = stats.fair
        out: list[Victim] = []
        for leaf, target in self.clocks.scan(now, stats, self.episodes):
            # k: the tasks to free for the app the leaf serves first, less those its victims
            # still running already cover (module docstring)
            path = self._paths[leaf]
            app, pending = stats.head(path)
            s = stats.task_share(app)
            k = math.ceil((target - stats.dominant(path)) / s - 1e-9) if s > 0 else 0
            k = min(k, pending) - len(self.groups.get(path, ()))
            if k > 0:
                out.extend(self._victims(now, leaf, path, app, k, stats))
        return out

    @property
    def last_evaluation(self) -> float:
        """The trace time the rules were last evaluated at (-inf: never)."""
        return self._last

    def wake(self, now: float) -> float | None:
        """The earliest time after ``now`` a starved leaf's timeout expires (None: none),
        when the driver must call ``decide`` although nothing else happens.  The drivers ask
        after every round; the clocks only move at an evaluation."""
        best = self._last + UPDATE_INTERVAL if self._skipped else INF
        best = min(best, self.clocks.wake_after(now))
        return best if best < INF else None

    @property
    def starved_since(self) -> dict[str, float]:
        """The leaves starved now (by path) and since when: their open episodes."""
        return {self._paths[leaf]: since for leaf, since in self.clocks.starved().items()}

    def due(self, now: float) -> list[int]:
        """The warned containers still running whose deadline is at or before ``now``."""
        return sorted(cid for cid, (v, _) in self.warned.items() if v.deadline <= now)

    def close(self, now: float) -> None:
        """The run ends at ``now``: a leaf still starved ends its episode unrestored (end inf)."""
        for path, start in sorted(self.starved_since.items()):
            self.episodes.append((_full(path), start, INF))
        self.clocks.end_all()

    def _forget_ended(self, live: dict) -> list[Victim]:
        """Forget the victims whose container left the scheduler; the others, still running."""
        warned = self.warned
        # most evaluations find every warned container still there (``<=`` looks each warned
        # id up in ``live``; ``warned.keys() - live.keys()`` would walk all of ``live``)
        if not warned.keys() <= live.keys():
            for cid in [cid for cid in warned if cid not in live]:
                v, group = warned.pop(cid)
                groups = self.groups[_path(v.starved)]
                groups[group] -= 1
                if not groups[group]:
                    del groups[group]
        return [v for v, _ in warned.values()]

    def _victims(self, now: float, leaf: int, path: str, app, k: int, stats: TreeView) -> list[Victim]:
        """Victims for ``k`` tasks of ``app`` (leaf ``path``, index ``leaf``), node by node (module docstring)."""
        deadline = now + self.settings[path].grace
        self.clocks.searched(leaf, deadline)
        out = []
        for chosen in choose_victims(stats, path, app, k, self.warned):
            self._group += 1
            groups = self.groups.setdefault(path, {})
            groups[self._group] = len(chosen)
            for cid, source_app, source in chosen:
                v = Victim(cid, source_app, _full(source), _full(path), deadline)
                self.warned[cid] = (v, self._group)
                out.append(v)
        if out:     # the next leaf's search this evaluation counts them as going too
            stats.withhold(stats.withheld + out)
        return out


def _full(path: str) -> str:
    return f"root.{path}" if path else "root"


def _path(full: str) -> str:
    return full[5:] if full.startswith("root.") else ""
