"""Job specs: an AppSpec plus how long each of its tasks runs.

Task durations are drawn once per job from the run's seed and the job's id, so
the simulator and the Ray replay run the same per-task durations for the same
seed, whatever order jobs are read in.

Duration forms (YAML value, or the CSV cell in brackets):

* a number — every task runs that long (``30``);
* a list — one duration per task (``[10, 12, 9]``; in CSV ``10|12|9``);
* ``{mean: M, jitter: J}`` — uniform on [M(1−J), M(1+J)], as the TSF micro-benchmark's
  "±20% from the mean" (tsf-paper §VI-A) (``uniform:M:J``);
* ``{dist: exponential, mean: M}`` (``exponential:M``);
* ``{dist: lognormal, mean: M, sigma: S}`` — the underlying normal has σ = S and
  μ = ln M − S²/2, so the mean is M (``lognormal:M:S``);
* ``{dist: pareto, alpha: A, mean: M}`` — Pareto with shape A > 1 and scale
  x_m = M(A−1)/A, so the mean is M (choosy-paper §6.2 uses A ≈ 1.9) (``pareto:A:M``);
  with ``max: S`` each draw is truncated at S seconds, min(x, S), and the mean is
  below M (``pareto:A:M:S``).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import AppSpec

DISTRIBUTIONS = ("fixed", "list", "uniform", "exponential", "lognormal", "pareto")


@dataclass(frozen=True)
class Durations:
    """How a job's task durations are drawn (see the module docstring)."""

    dist: str
    mean: float = 0.0
    jitter: float = 0.0
    sigma: float = 0.0
    alpha: float = 0.0
    values: tuple[float, ...] = ()
    max: float = 0.0                 # pareto only: truncate each draw at this (0: no bound)

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        if self.dist == "fixed":
            return np.full(n, self.mean)
        if self.dist == "list":
            return np.array(self.values[:n], dtype=float)
        if self.dist == "uniform":
            return rng.uniform(self.mean * (1 - self.jitter), self.mean * (1 + self.jitter), n)
        if self.dist == "exponential":
            return rng.exponential(self.mean, n)
        if self.dist == "lognormal":
            mu = np.log(self.mean) - self.sigma ** 2 / 2
            return rng.lognormal(mu, self.sigma, n)
        if self.dist == "pareto":
            xm = self.mean * (self.alpha - 1) / self.alpha
            drawn = xm * (1 + rng.pareto(self.alpha, n))
            return np.minimum(drawn, self.max) if self.max > 0 else drawn
        raise AssertionError(self.dist)

    def to_cell(self) -> str:
        """The compact CSV form, the inverse of ``parse_durations`` on a string."""
        if self.dist == "fixed":
            return f"{self.mean:g}"
        if self.dist == "list":
            return "|".join(f"{v:g}" for v in self.values)
        if self.dist == "uniform":
            return f"uniform:{self.mean:g}:{self.jitter:g}"
        if self.dist == "exponential":
            return f"exponential:{self.mean:g}"
        if self.dist == "lognormal":
            return f"lognormal:{self.mean:g}:{self.sigma:g}"
        return f"pareto:{self.alpha:g}:{self.mean:g}" + (f":{self.max:g}" if self.max > 0 else "")


def _positive(value: Any, what: str, allow_zero: bool = False) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{what} must be a number, got {value!r}") from None
    if not np.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        raise InputError(f"{what} must be {'non-negative' if allow_zero else 'positive'}, got {value!r}")
    return x


def parse_durations(value: Any, num_tasks: int | None = None) -> Durations:
    """A Durations from a YAML value or a CSV cell; raises InputError saying what is wrong."""
    if isinstance(value, bool) or value is None:
        raise InputError(f"a duration is needed (a number, a list or a distribution), got {value!r}")
    if isinstance(value, (int, float)):
        return Durations("fixed", mean=_positive(value, "duration", allow_zero=True))
    if isinstance(value, (list, tuple)):
        vals = tuple(_positive(v, "duration", allow_zero=True) for v in value)
        if num_tasks is not None and len(vals) != num_tasks:
            raise InputError(f"{len(vals)} durations listed for {num_tasks} tasks")
        return Durations("list", values=vals)
    if isinstance(value, str):
        text = value.strip()
        if "|" in text:
            return parse_durations(text.split("|"), num_tasks)
        head, *args = text.split(":")
        try:
            return parse_durations(float(head), num_tasks) if not args else _from_cell(head, args)
        except ValueError:
            raise InputError(f"cannot read duration {value!r} (e.g. 30, uniform:30:0.2, "
                             f"exponential:30, lognormal:30:1, pareto:1.9:30)") from None
    if isinstance(value, dict):
        spec = dict(value)
        dist = str(spec.pop("dist", "uniform" if "jitter" in spec else "fixed"))
        if dist not in DISTRIBUTIONS or dist == "list":
            raise InputError(f"unknown duration distribution {dist!r} "
                             f"(choose from fixed, uniform, exponential, lognormal, pareto)")
        need = {"fixed": {"mean"}, "uniform": {"mean", "jitter"}, "exponential": {"mean"},
                "lognormal": {"mean", "sigma"}, "pareto": {"mean", "alpha"}}[dist]
        optional = {"max"} if dist == "pareto" else set()
        missing, extra = need - set(spec), set(spec) - need - optional
        if missing:
            raise InputError(f"duration '{dist}' needs {', '.join(sorted(missing))}")
        if extra:
            raise InputError(f"duration '{dist}' does not take {', '.join(sorted(map(str, extra)))}")
        kw = {k: _positive(v, f"duration {k}", allow_zero=(k in ("jitter", "sigma")))
              for k, v in spec.items()}
        if dist == "uniform" and kw["jitter"] > 1:
            raise InputError(f"duration jitter is a fraction of the mean (0..1), got {kw['jitter']}")
        if dist == "pareto" and kw["alpha"] <= 1:
            raise InputError(f"pareto alpha must be > 1 for a finite mean, got {kw['alpha']}")
        return Durations(dist, **kw)
    raise InputError(f"cannot read duration {value!r}")


def _from_cell(head: str, args: list[str]) -> Durations:
    nums = [float(a) for a in args]
    keys = {"uniform": ("mean", "jitter"), "exponential": ("mean",),
            "lognormal": ("mean", "sigma"), "pareto": ("alpha", "mean")}.get(head)
    if head == "pareto" and len(nums) == 3:
        keys = ("alpha", "mean", "max")
    if keys is None or len(nums) != len(keys):
        raise ValueError(head)
    return parse_durations({"dist": head, **dict(zip(keys, nums))})


@dataclass(frozen=True)
class JobSpec:
    """One job of a workload: the app the RM sees plus its task durations."""

    app: AppSpec
    durations: Durations

    @property
    def job_id(self) -> str:
        return self.app.app_id

    def task_durations(self, seed: int) -> np.ndarray:
        """Per-task durations for this run's seed; the same in every mode."""
        rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(self.app.app_id.encode())])
        return self.durations.draw(self.app.num_tasks, rng)
