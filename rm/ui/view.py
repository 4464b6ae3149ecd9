"""What the UI and the REST API show: one immutable ``ClusterView`` per moment.

Both sources build it — the live replay from the RM's snapshot (``live``), a run
directory from its tables (``rundir``) — and everything served is a function of it
(``yarn``, ``extras``), so the same page and API read a replay as it runs and any run
after the fact.  Times are trace seconds; ``start_epoch`` and ``time_scale`` turn them
into the wall clock (epoch seconds = start_epoch + t × time_scale), which is what YARN's
fields carry.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.policies import make_policy

#: rayrm's job statuses (jobs.csv) -> YARN's (application state, final status)
YARN_APP_STATE = {
    "waiting": ("ACCEPTED", "UNDEFINED"),      # registered, no task started yet
    "running": ("RUNNING", "UNDEFINED"),
    "finished": ("FINISHED", "SUCCEEDED"),
    "failed": ("FAILED", "FAILED"),
    "rejected": ("FAILED", "FAILED"),          # YARN fails an app it cannot admit
    "unfinished": ("KILLED", "KILLED"),        # the run was interrupted
}

#: YARN's NodeState values rayrm can show
NODE_STATES = ("NEW", "RUNNING", "UNHEALTHY", "DECOMMISSIONED", "DECOMMISSIONING", "LOST", "REBOOTED",
               "SHUTDOWN")


@dataclass(frozen=True)
class NodeView:
    """One NodeManager: capacity and use per dimension (the view's ``dims`` order)."""

    name: str
    state: str                          # one of NODE_STATES
    capacity: tuple[float, ...]
    used: tuple[float, ...]
    containers: int
    last_update: float                  # trace time of its last heartbeat (or state change)
    attributes: dict = field(default_factory=dict)
    ray_node: str = ""
    detail: str = ""                    # why it is lost or gone


@dataclass(frozen=True)
class AppView:
    """One application (job) and its tasks right now."""

    app: str
    status: str                         # a key of YARN_APP_STATE
    num_tasks: int
    running: int
    pending: int
    finished: int
    demand: tuple[float, ...]
    weight: float
    submit: float
    first_start: float | None
    finish: float | None
    attempts: int
    task_share: float
    dominant_share: float
    constraint: str = ""
    reason: str = ""                    # diagnostics: rejection, failure or why it waits
    eligible: int = -1                  # live nodes it may use that hold a task (-1: unknown)
    attempt_starts: tuple = ()          # trace times attempts 2, 3, ... started (where known)
    queue: str = "default"              # its leaf queue's path below root
    user: str = "default"
    share: float | None = None          # the policy's own share (live), where no field holds it
    preempted: int = 0                  # its containers killed at a preemption's deadline
    warned: int = 0                     # its containers warned now (a PreemptionMessage), not yet ended


@dataclass(frozen=True)
class Fault:
    """A fault injected (the ``--fault`` specs and the config's ``faults:``) or a node lost."""

    time: float
    kind: str
    target: str
    text: str


@dataclass(frozen=True)
class History:
    """Series over trace time for the charts: one sample per snapshot (live) or per grid
    point (run directory).  ``shares`` maps an app to its (time, share) points in the
    policy's own terms."""

    times: tuple[float, ...] = ()
    used: tuple[tuple[float, ...], ...] = ()          # per sample, per dim: fraction of the live total
    running: tuple[int, ...] = ()
    pending: tuple[int, ...] = ()
    lag: tuple[float, ...] = ()
    shares: dict = field(default_factory=dict)
    queues: dict = field(default_factory=dict)        # queue -> [(time, share, owed)] (``rm/core/queues/owed.py``)


@dataclass(frozen=True)
class ClusterView:
    """The cluster at one moment, and how it got there."""

    name: str
    policy: str
    mode: str                           # ray | sim
    dims: tuple[str, ...]
    time: float                         # trace time of the view
    start_epoch: float                  # wall clock (epoch s) at trace time 0
    time_scale: float
    heartbeat_interval: float
    state: str                          # live | finished | interrupted | partial
    nodes: tuple[NodeView, ...]
    apps: tuple[AppView, ...]
    allocations: int                    # containers allocated since the start
    faults: tuple[Fault, ...] = ()
    pace: dict = field(default_factory=dict)
    history: History = field(default_factory=History)
    version: int = 0                    # increases with every new snapshot
    share_kind: str = "task_share"      # the kind of share the policy ranks by (Policy.share_kind)
    tree: object = None                 # the config's QueueTree (None: one leaf, root.default)
    preemption: bool = False            # the config's preemption is on

    def epoch_ms(self, t: float | None) -> int:
        """Trace time ``t`` as YARN gives times: epoch milliseconds of the wall clock (0 for None)."""
        if t is None or t != t:
            return 0
        return int(round((self.start_epoch + t * self.time_scale) * 1000))

    def app(self, app_id: str) -> AppView | None:
        return next((a for a in self.apps if a.app == app_id), None)

    def node(self, name: str) -> NodeView | None:
        return next((n for n in self.nodes if n.name == name), None)

    def share_of(self, app: AppView) -> float:
        """The app's share in the policy's own terms: ``share`` where the source gave it,
        else the ``AppView`` field of that name."""
        return app.share if app.share is not None else getattr(app, self.share_kind)

    def live_total(self) -> tuple[float, ...]:
        """The capacity of the live nodes per dimension."""
        alive = [n for n in self.nodes if n.state == "RUNNING"]
        return tuple(sum(n.capacity[k] for n in alive) for k in range(len(self.dims)))


def share_kind(policy: str) -> str:
    """The kind of share the UI shows for a policy spec: the one the policy says it ranks by
    (``Policy.share_kind``: task share for TSF, dominant share for the DRF family, a plugin's
    own); the task share for a spec that does not load (``ray-native``, a plugin file gone)."""
    try:
        return make_policy(policy).share_kind().name
    except InputError:
        return "task_share"
