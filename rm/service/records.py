"""What the ResourceManager keeps per node, container and app (rm/service/state.py uses them).

Plain mutable records, private to the RM: everything that leaves the RM is a
frozen message of rm/service/protocol.py.
"""

from __future__ import annotations

import functools

from dataclasses import dataclass, field

from rayrm.rm.core.model import AppSpec, NodeSpec
from rayrm.rm.service.protocol import Allocation, ContainerStatus

# Container life at the RM: ALLOCATED (placed, not yet given to the AM) -> ACQUIRED
# (delivered) -> RUNNING (the NM launched it) -> COMPLETE; or RELEASED (the AM gave it back,
# or its attempt failed before launching it).
ALLOCATED, ACQUIRED, RELEASED = "ALLOCATED", "ACQUIRED", "RELEASED"


@dataclass(slots=True)
class NodeRecord:
    """One NodeManager as the RM sees it.

    ``host`` is the NM host (caller id) that registered it: only that host may
    heartbeat for it while it is alive.  ``resync`` is set when the RM recovered
    from a restart: the NM's next heartbeat is answered RESYNC and it registers again
    with its containers.
    """

    spec: NodeSpec
    host: str = ""
    ray_node: str = ""
    alive: bool = False
    last_seen: float = 0.0
    last_sent: float = 0.0               # its host's send time of the last call that carried it
    last_call: int = 0                   # its host's heartbeat count then
    cleanup: list[int] = field(default_factory=list)
    resync: bool = False


@dataclass(slots=True)
class ContainerRecord:
    """One container; ``attempt`` is the task attempt number the RM gave it (0, 1, ...)."""

    container: int
    app: str
    node: str
    allocated: float
    state: str = ALLOCATED
    task: int = -1
    attempt: int = 0
    launched: float | None = None
    given_up: bool = False      # declared lost or released: a finish reported later is not its task's


@dataclass(slots=True)
class AppRecord:
    """One application and its current attempt (YARN RMApp + RMAppAttempt).

    ``attempt`` is the current attempt number; ``launching`` means the RM has
    started that attempt (after the previous one failed) and it has not registered
    yet.  ``last_seen`` is the current attempt's last call (AM liveness).
    ``task_attempts`` numbers each task's attempts in the order NMs report them
    running, so tasks.csv has one row per attempt whatever the AMs number them.
    """

    spec: AppSpec
    host: str
    attempt: int
    submit: float                        # trace time the RM accepted it
    undelivered: list[Allocation] = field(default_factory=list)
    completed: list[ContainerStatus] = field(default_factory=list)
    warnings: list[tuple[int, float]] = field(default_factory=list)   # preempted (container, deadline), not yet told
    asked: dict[int, float] = field(default_factory=dict)   # task -> trace time of its latest ask
    last_ask: int = 0                    # the ask of its AM's latest full AllocateRequest
    finished_tasks: set[int] = field(default_factory=set)
    task_attempts: dict[int, int] = field(default_factory=dict)
    last_finish: float | None = None
    done: bool = False
    last_seen: float = 0.0
    last_sent: float = 0.0               # its host's send time of the last allocate that carried it
    last_call: int = 0                   # its host's allocate count then
    launching: bool = False
    uncounted: int = 0                   # attempts lost with their AM host (not held against max_attempts)
    resync: bool = False

    @property
    def active(self) -> bool:
        """The app goes on and its current attempt has registered (it is not being launched,
        and no restarted RM waits for it to register again): the attempt an AM host's mark
        covers and whose calls are answered as its own."""
        return not (self.done or self.resync or self.launching)


NOT_ANSWERED = object()


def answered(responses: dict, caller: str, request_id: int):
    """The answer already given to this (caller, request id), or ``NOT_ANSWERED``."""
    hit = responses.get(caller)
    return hit[1] if hit is not None and hit[0] == request_id else NOT_ANSWERED


def idempotent(method):
    """A protocol call retried with the same (caller, request id) gets its first answer
    back and changes nothing (the answers live in ``self.responses``, which is part of
    the RM's saved state, so this holds across an RM restart too)."""
    @functools.wraps(method)
    def call(self, now, caller, request_id, *args, **kwargs):
        hit = answered(self.responses, caller, request_id)
        if hit is not NOT_ANSWERED:
            return hit
        response = method(self, now, caller, request_id, *args, **kwargs)
        self.responses[caller] = (request_id, response)
        self.liveness.caller_seen[caller] = now       # liveness: when this host was last heard
        return response
    return call
