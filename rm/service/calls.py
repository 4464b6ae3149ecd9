"""The ResourceManager's calls, each declared once (docs/design.md, "The protocol").

A call is one row of ``Call``: its handler — the typed method of ``ResourceManagerState``
that applies it, whose name is the call's name and whose signature after ``now`` is the
call's arguments and their types — who may make it, and whether the RM actor journals
it as it applies it.  Everything else is read from this table:

    the Call enum        the journal's record names (rm/service/store.py) and ``Call.apply``,
                         the replay of a record through its handler
    HOST_CALLS           the calls the hosts' channel serves (rm/service/channel.py), and
                         ``RMClient``'s typed methods, one per call (rm/service/client.py)
    DRIVER_CALLS         the calls the RM actor takes by Ray (``ResourceManager.call``)
    journaled            which calls the actor journals as it applies them; a ``poll`` is
                         journaled only when it delivers (``ResourceManager``'s long poll)

Who calls: an NM or AM host on the RM's channel (``HOST``), the replay's driver by Ray
(``DRIVER``), or the RM actor itself — its monitor and its restart (``RM``).  A call that
carries ``caller`` and ``request_id`` (the handler's parameters after ``now``) is answered
idempotently (``records.idempotent``).
"""

from __future__ import annotations

import enum
import inspect
from dataclasses import dataclass
from typing import Callable

from rayrm.rm.service.state import ResourceManagerState

_S = ResourceManagerState


class By(enum.Flag):
    """Who may make a call."""

    HOST = enum.auto()        # an NM or AM host, on the RM's channel
    DRIVER = enum.auto()      # the replay's driver, a Ray call on the RM actor
    RM = enum.auto()          # the RM actor itself


@dataclass(frozen=True)
class CallSpec:
    """One row of the table: the state's ``handler``, who may call it (``by``), and whether
    the actor journals every application of it (``journaled``)."""

    handler: Callable
    by: By
    journaled: bool = True

    @property
    def name(self) -> str:
        return self.handler.__name__

    @property
    def parameters(self) -> tuple[inspect.Parameter, ...]:
        """The call's arguments as its handler declares them, after ``self`` and ``now``."""
        return tuple(inspect.signature(inspect.unwrap(self.handler)).parameters.values())[2:]

    @property
    def numbered(self) -> bool:
        """Whether the call carries ``(caller, request_id)`` and is answered idempotently."""
        return [p.name for p in self.parameters[:2]] == ["caller", "request_id"]


class Call(str, enum.Enum):
    """Every state-changing call on the RM's state (the module docstring's table).

    A member's value is its handler's name, which is what a journal record names; a
    record naming no member is an error, not a silently skipped call."""

    spec: CallSpec

    def __new__(cls, spec: CallSpec):
        member = str.__new__(cls, spec.name)
        member._value_ = spec.name
        member.spec = spec
        return member

    REGISTER_NODES = CallSpec(_S.register_nodes, By.HOST)
    NODE_HEARTBEAT = CallSpec(_S.node_heartbeat, By.HOST)
    REGISTER_APPS = CallSpec(_S.register_apps, By.HOST)
    ALLOCATE = CallSpec(_S.allocate, By.HOST)
    FINISH_APPS = CallSpec(_S.finish_apps, By.HOST)
    LOSE_NODE = CallSpec(_S.lose_node, By.HOST | By.DRIVER)   # an NM that left, its host or the driver says
    POLL = CallSpec(_S.poll, By.RM, journaled=False)        # the second half of a long-polled allocate
    LOSE_HOST = CallSpec(_S.lose_host, By.DRIVER)
    LOSE_AM_HOST = CallSpec(_S.lose_am_host, By.DRIVER)
    FAULT = CallSpec(_S.fault, By.DRIVER)
    START_CLOCK = CallSpec(_S.start_clock, By.DRIVER)
    EXPIRE_NODES = CallSpec(_S.expire_nodes, By.RM)
    EXPIRE_APPS = CallSpec(_S.expire_apps, By.RM)
    EXPIRE_ALLOCATIONS = CallSpec(_S.expire_allocations, By.RM)
    RECOVERED = CallSpec(_S.recovered, By.RM)
    PREEMPT = CallSpec(_S.preempt, By.RM)     # preemption's tick: victims warned, the due killed

    def apply(self, state: ResourceManagerState, now: float, *args):
        """Apply the call to ``state`` at wall time ``now`` through its handler."""
        return self.spec.handler(state, now, *args)


#: name -> call, for the calls the hosts make on the RM's channel
HOST_CALLS = {c.value: c for c in Call if By.HOST in c.spec.by}
#: the calls the driver makes on the RM actor by Ray
DRIVER_CALLS = frozenset(c for c in Call if By.DRIVER in c.spec.by)
