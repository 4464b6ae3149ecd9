"""The data model: resource vectors, nodes, applications.

Everything here is immutable and validated once, at the edge (config and trace
loaders build these objects, many at once, with the cyclic collector paused:
``paused_gc``; the core trusts them).  Resource vectors are named
(``cpu``, ``memory_mb``, ``gpu``, ... as configured); a demand that omits a
dimension demands 0 of it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
import gc
from typing import Iterable, Mapping, NamedTuple

from rayrm.rm.core.constraints import Constraint, ANY_NODE
from rayrm.rm.core.errors import InputError

# Fit checks compare floats accumulated by repeated subtraction; a task that
# fits exactly must not be refused because 1.0 - 0.5 - 0.5 came out as 1e-17.
EPS = 1e-9


class Resources(Mapping[str, float]):
    """An immutable named resource vector, e.g. ``Resources(cpu=1, memory_mb=512)``.

    Compact literals as in the Mesos tests: ``Resources.parse("cpu:1;memory_mb:512")``.
    Missing dimensions read as 0.
    """

    __slots__ = ("_v",)

    def __init__(self, values: Mapping[str, float] | None = None, **kw: float):
        merged = dict(values or {}, **kw)
        self._v = {k: float(v) for k, v in merged.items() if float(v) != 0.0}

    @classmethod
    def parse(cls, text: str) -> "Resources":
        out = {}
        for part in filter(None, (p.strip() for p in text.split(";"))):
            name, _, value = part.partition(":")
            out[name.strip()] = float(value)
        return cls(out)

    def __getitem__(self, key: str) -> float:
        return self._v.get(key, 0.0)

    def __iter__(self):
        return iter(self._v)

    def __len__(self) -> int:
        return len(self._v)

    def __hash__(self) -> int:
        return hash(frozenset(self._v.items()))

    def __eq__(self, other) -> bool:
        if isinstance(other, Resources):
            return self._v == other._v
        return NotImplemented

    def __repr__(self) -> str:
        inner = ";".join(f"{k}:{v:g}" for k, v in sorted(self._v.items()))
        return f"Resources({inner!r})"

    def vector(self, dims: Iterable[str]) -> tuple[float, ...]:
        """The values in the order of ``dims`` (a dimension not named is 0)."""
        return tuple(self._v.get(d, 0.0) for d in dims)


@dataclass(frozen=True)
class NodeSpec:
    """A machine: its name, capacity vector and attributes (strings or numbers)."""

    name: str
    capacity: Resources
    attributes: Mapping[str, str | float] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash(self.name)


#: the leaf a job without a queue goes to, and the user of a job that names none
DEFAULT_QUEUE = "default"
DEFAULT_USER = "default"


def queue_path(name: str) -> str:
    """A queue's path below root, as jobs and the tree name it: ``root.eng.batch`` and
    ``eng.batch`` are both ``eng.batch``."""
    name = name.strip()
    if name == "root":
        return ""
    return name[len("root."):] if name.startswith("root.") else name


@dataclass(frozen=True)
class AppSpec:
    """An application (job): one demand vector for all its tasks.

    ``weight`` is w_i of weighted TSF (tsf-paper Definition 7); ``submit`` is the
    trace time the app arrives; ``constraint`` picks the nodes it may use; ``queue``
    is the leaf of the queue tree it is submitted to (its path below root) and ``user``
    who submitted it.
    """

    app_id: str
    demand: Resources
    num_tasks: int
    weight: float = 1.0
    submit: float = 0.0
    constraint: Constraint = ANY_NODE
    queue: str = DEFAULT_QUEUE
    user: str = DEFAULT_USER

    def __post_init__(self):
        if self.queue.startswith("root.") or self.queue == "root":
            object.__setattr__(self, "queue", queue_path(self.queue))
        if self.num_tasks < 0:
            raise InputError(f"app {self.app_id}: num_tasks must be >= 0, got {self.num_tasks}")
        if not self.weight > 0:
            raise InputError(f"app {self.app_id}: weight must be > 0, got {self.weight}")
        if any(v < 0 for v in self.demand.values()) or not any(v > 0 for v in self.demand.values()):
            raise InputError(f"app {self.app_id}: demand must be non-negative and not all zero")

    def __hash__(self) -> int:
        return hash(self.app_id)


class Container(NamedTuple):
    """One running task attempt: which app, which task index, on which node.

    A named tuple (immutable, as the frozen dataclass it was): one is made per placement,
    and a tuple is built three times faster than a frozen dataclass sets its fields."""

    container_id: int
    app_id: str
    task: int
    node: str


# ----- building them in bulk ------------------------------------------------------

@contextlib.contextmanager
def paused_gc():
    """Pause the cyclic collector for the block; re-enable it after only if it was on.

    A config's parse and a simulation allocate hundreds of thousands of small objects that
    reference counting frees on its own (rows, specs, events, none in a cycle); every 700 of
    them the collector would walk the young ones, and each full collection every object
    alive. On the paper-scale trace that is about a third of ``load_config``'s time and
    about 10% of a simulation's.  Nested pauses leave the collector off until the outer one ends.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
