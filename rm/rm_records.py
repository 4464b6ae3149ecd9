"""What the ResourceManager keeps per node, container and app (rm/rm_state.py uses them).

Plain mutable records, private to the RM: everything that leaves the RM is a
frozen message of rm/protocol.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rm.model import AppSpec, NodeSpec
from rm.protocol import Allocation, ContainerStatus

# Container life at the RM: ALLOCATED (placed, not yet given to the AM) -> ACQUIRED
# (delivered) -> RUNNING (the NM launched it) -> COMPLETE; or RELEASED (the AM gave it back).
ALLOCATED, ACQUIRED, RELEASED = "ALLOCATED", "ACQUIRED", "RELEASED"


@dataclass
class NodeRecord:
    spec: NodeSpec
    host: str = ""
    ray_node: str = ""
    alive: bool = False
    last_seen: float = 0.0
    cleanup: list[int] = field(default_factory=list)


@dataclass
class ContainerRecord:
    container: int
    app: str
    node: str
    allocated: float
    state: str = ALLOCATED
    task: int = -1
    attempt: int = 0
    launched: float | None = None


@dataclass
class AppRecord:
    spec: AppSpec
    host: str
    attempt: int
    submit: float                        # trace time the RM accepted it
    undelivered: list[Allocation] = field(default_factory=list)
    completed: list[ContainerStatus] = field(default_factory=list)
    asked: dict[int, float] = field(default_factory=dict)   # task -> trace time of its latest ask
    finished_tasks: set[int] = field(default_factory=set)
    last_finish: float | None = None
    done: bool = False
