"""The replay's pace: how far behind its own schedule it runs, and what that means.

The trace clock is the wall clock (``TraceClock``, rm/core/clock.py): the replay
never slows it down, so an RM that cannot keep up falls *behind* — heartbeats are
handled late, allocations reach their AMs late, containers launch late — and the
run's timings are then the RM's, not the policy's.  What is measured:

* **node heartbeats** — when due (the NM's schedule) vs. when the RM handled them;
* **the RM's event loop** — how late its monitor ticks run (``rm/service/liveness.py``);
* **allocations** — the NODE_UPDATE that made one vs. when its AM got it (AM host);
* **launches** — allocated vs. running on its NM.

``PaceMeter`` (in the RM actor) keeps one sample per monitor tick: the larger of the
loop's lateness and the worst heartbeat lag since the last tick.  ``pace_summary``
turns the samples into summary.json's ``pace`` section: lag p50 / p99 / max in wall
and trace seconds, ``behind_fraction`` (the share of the run's ticks more than one
heartbeat interval behind), ``kept_pace`` (``behind_fraction`` at most
``KEPT_PACE_BEHIND``), and when it did not, ``suggested_time_scale``.
"""

from __future__ import annotations

import math

import numpy as np

#: a run kept pace when at most this share of its ticks ran more than one heartbeat interval behind
KEPT_PACE_BEHIND = 0.05


class PaceMeter:
    """How far behind its own schedule the RM runs, one sample per monitor tick.

    A tick's sample is the larger of the loop's lateness at that tick and the worst
    lag of the NM heartbeats handled since the previous tick (handled − due: a
    heartbeat due at t and handled at t + x was x seconds behind).
    """

    def __init__(self, interval_wall: float):
        self.interval = interval_wall
        self.samples: list[tuple[float, float]] = []      # (wall time, seconds behind)
        self.beat_lags: list[float] = []                  # worst heartbeat lag per tick
        self._beats = 0.0
        self._last = 0.0

    def heartbeat_due(self, now: float, due: float) -> None:
        """A batch of NM heartbeats, the earliest of them due at ``due``, is handled ``now``."""
        self._beats = max(self._beats, now - due)

    def tick(self, now: float, late: float) -> None:
        self.beat_lags.append(self._beats)
        self._last = max(late, self._beats)
        self.samples.append((now, self._last))
        self._beats = 0.0

    def current(self) -> tuple[float, bool]:
        """(the worst of the last second's samples, whether most of them were over one interval)."""
        recent = [x for t, x in self.samples[-200:] if t >= (self.samples[-1][0] - 1.0)] if self.samples else []
        over = sum(1 for x in recent if x > self.interval)
        return max(recent, default=0.0), over > len(recent) / 2

    def export(self) -> dict:
        return {"interval_wall": self.interval, "samples": list(self.samples), "beat_lags": list(self.beat_lags)}


def _pct(values, scale: float = 1.0) -> dict:
    if len(values) == 0:
        return {}
    arr = np.asarray(values, dtype=float) * scale
    return {"p50": round(float(np.percentile(arr, 50)), 4), "p99": round(float(np.percentile(arr, 99)), 4),
            "max": round(float(arr.max()), 4)}


def _round_up(x: float) -> float:
    """x rounded up to two significant digits (0.0303 -> 0.031)."""
    step = 10.0 ** (math.floor(math.log10(x)) - 1)
    return round(math.ceil(x / step - 1e-9) * step, 8)


def pace_summary(meter: dict, *, time_scale: float, delivery=(), launch=(), cpu_seconds: float = 0.0,
                 wall_seconds: float = 0.0) -> dict:
    """summary.json's ``pace`` section from the RM's ``PaceMeter.export()`` (module doc).

    ``suggested_time_scale`` (only when behind): the time scale × the larger of
    p99 lag / interval and the RM's CPU utilisation / 0.7, rounded up to two digits: the
    scale at which nearly every tick's lag, as measured, would fit in one heartbeat
    interval (the interval grows with the time scale).  An estimate: the lag in wall
    seconds depends on the load as well — at 0.005 and 0.01 the paper-scale replay lags
    about as much as at 0.02, which keeps pace — so the 99th percentile, not the 95th
    that ``kept_pace`` allows, to stay on the safe side.
    """
    interval = meter["interval_wall"]
    lags = [x for _, x in meter["samples"]]
    if not lags:
        return {"kept_pace": None, "note": "not measured (the RM's measurements were not available)"}
    behind = sum(1 for x in lags if x > interval) / len(lags) if lags else 0.0
    out = {"heartbeat_interval_wall_s": interval,
           "lag_wall_s": _pct(lags), "lag_trace_s": _pct(lags, 1.0 / time_scale),
           "heartbeat_lag_wall_s": _pct(meter["beat_lags"]),
           "allocation_delivery_wall_s": _pct(delivery), "allocation_to_launch_wall_s": _pct(launch),
           "behind_fraction": round(behind, 4), "kept_pace": behind <= KEPT_PACE_BEHIND}
    if cpu_seconds and wall_seconds:
        out["rm_cpu_utilisation"] = round(cpu_seconds / wall_seconds, 3)
    if not out["kept_pace"]:
        q = float(np.percentile(lags, 99))
        factor = max(q / interval if interval else 1.0, out.get("rm_cpu_utilisation", 0.0) / 0.7)
        out["suggested_time_scale"] = _round_up(time_scale * max(factor, 1.01))
    return out


def pace_warning(pace: dict, time_scale: float) -> str:
    """The line the user sees when the replay fell behind ('' when it kept pace)."""
    if pace.get("kept_pace") is not False:
        return ""
    lag = pace.get("lag_wall_s", {})
    return (f"WARNING: the replay fell behind its schedule for {pace['behind_fraction']:.0%} of the run "
            f"(lag p99 {lag.get('p99', 0):.3f}s, max {lag.get('max', 0):.3f}s wall; one heartbeat is "
            f"{pace['heartbeat_interval_wall_s']:.3f}s): its timings are distorted by the RM's own "
            f"slowness. Try --time-scale {pace.get('suggested_time_scale', time_scale * 2):g}.")
