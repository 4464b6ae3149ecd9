"""One logical NodeManager's state inside a NodeManager host (nodes/host.py).

A host runs many of these.  Each keeps what YARN's NodeStatusUpdater keeps: the
containers it runs, the RUNNING statuses not yet reported, the COMPLETE ones not
yet acknowledged by the RM, and the launches it refused (fencing) not yet
reported.  ``registration`` is what it tells the RM when it (re-)registers:
capacity, attributes and every container it still knows (YARN's NMContainerStatus).
"""

from __future__ import annotations

from rayrm.rm.core.model import NodeSpec
from rayrm.rm.service.protocol import RUNNING, ContainerLaunch, ContainerStatus, NodeRegistration


class NodeManagerState:
    """One logical NodeManager's state inside its host (nodes/host.py)."""

    __slots__ = ("spec", "alive", "slot", "born", "new", "unacked", "containers", "refused", "killed")

    def __init__(self, spec: NodeSpec, born: int = 0):
        self.spec = spec
        self.alive = True
        self.slot = -1                                       # its heartbeat slot in the host
        self.born = born                                     # the host's count of NMs started before it
        self.new: list[ContainerStatus] = []                 # RUNNING, not yet reported
        self.unacked: dict[int, ContainerStatus] = {}        # COMPLETE, not yet acknowledged
        self.containers: dict[int, tuple[ContainerLaunch, float, object]] = {}
        self.refused: list[tuple[int, str, str]] = []        # launches refused, not yet reported
        self.killed: set[int] = set()                        # containers being killed (each once)

    def has_news(self) -> bool:
        """Whether it has something to report (statuses, refusals): it beats by name."""
        return bool(self.new or self.unacked or self.refused)

    def registration(self, ray_node: str) -> NodeRegistration:
        """RegisterNodeManager: capacity, attributes, and every container it still knows."""
        running = [ContainerStatus(launch.container, launch.app, launch.task, launch.attempt, launch.node,
                                   RUNNING, launched) for launch, launched, _ in self.containers.values()]
        return NodeRegistration(self.spec.name, dict(self.spec.capacity), dict(self.spec.attributes),
                                ray_node, 0, tuple(running) + tuple(self.unacked.values()))
