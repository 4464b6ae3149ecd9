"""The replay's trace clock: trace time on the wall clock (docs/design.md, "The replay").

A replay runs the trace ``scale`` wall seconds per trace second from ``start``, the wall
time (``time.time()``) of t = 0, so that

    wall = start + t × scale        t = (wall − start) / scale

and a trace duration d lasts d × scale wall seconds.  The driver picks ``start`` a moment
ahead and hands the one ``TraceClock`` to the RM, the NM and AM hosts, the fault
injector and the supervisor; the simulator has no wall clock and needs none.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TraceClock:
    """t = 0 at wall time ``start``; ``scale`` wall seconds per trace second (module docstring)."""

    start: float
    scale: float

    def __post_init__(self):
        if not self.scale > 0:
            raise ValueError(f"a trace clock runs forward: scale {self.scale!r}")

    def wall(self, t: float) -> float:
        """The wall time of trace time ``t``: start + t × scale."""
        return self.start + t * self.scale

    def trace(self, wall: float) -> float:
        """The trace time of wall time ``wall``: (wall − start) / scale, 0 before t = 0."""
        return max(0.0, (wall - self.start) / self.scale)

    def elapsed(self, wall: float) -> float:
        """Wall seconds from t = 0 to ``wall``."""
        return wall - self.start

    def wall_seconds(self, trace_seconds: float) -> float:
        """How long a trace duration lasts on the wall clock: d × scale."""
        return trace_seconds * self.scale

    def trace_seconds(self, wall_seconds: float) -> float:
        """A wall-clock duration in trace seconds: w / scale."""
        return wall_seconds / self.scale
