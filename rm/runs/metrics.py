"""Metrics of tsf-paper §VI from run directories (pandas), for simulated and Ray runs alike.

Everything here reads the run directory alone (``rayrm.rm.runs.reader.RunDir``; docs/design.md
principle 3), so ``rayrm compare``, ``rayrm report`` and the tests share one
definition of each number.  Every function takes a ``RunDir`` or a path.

Per run

* ``job_queueing_delay``  first task start − job arrival (tsf-paper §VI-B2, Fig. 9a)
* ``job_completion_time`` job finish − job arrival (Fig. 9b)
* ``task_queueing_delay`` start of a task's first attempt − its submission (§VI-B3, Fig. 11a)
* ``time_averaged_shares`` / ``average_share``  (1/(t1 − t0)) ∫_{t0}^{t1} s_i(t) dt of the
  step function in shares.csv (Fig. 5), exact because a row is written at every change
* ``share_timeline``      the same step functions as a time × app table
* ``utilization``         U_r(t) = Σ_{attempts running at t} d_{app,r} / Σ_m C_{m,r}
* ``run_summary``         makespan and the percentiles above, one flat dict

The noise floor of a comparison

* ``launch_noise``        per run: 0 for an exact simulation, the launch jitter of a jittered
  one, max(p99 allocation-to-running latency in trace s, one heartbeat) for a Ray replay
* ``noise_tolerance``     the largest of the runs' (or ``--tolerance``): differences within
  ±tolerance count as equal in every better/equal/worse count, speedup bin and CDF below

TSF against another policy P on the same trace and seed

* ``job_speedups``        per job: C_P − C_TSF (seconds) and (C_P − C_TSF)/C_P, with its size bin
  (≤ 10, 11–100, 101–500, > 500 tasks; Fig. 10)
* ``speedup_by_size``     mean ± std (ddof 0) of those per bin
* ``task_speedups``       per task: D_P − D_TSF, the reduction of task queueing delay (Fig. 11b)
* ``task_speedup_fractions`` fractions of tasks TSF shortens / leaves equal / lengthens
  (paper: TSF shortens about 60% against each alternative)
* ``comparison_table``    one row per policy: makespan, delay percentiles, and the above
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rayrm.rm.core.config import RunSettings
from rayrm.rm.core.shares import LOGGED
from rayrm.rm.runs.reader import RunDir

SIZE_BINS = ((1, 10, "<=10"), (11, 100, "11-100"), (101, 500, "101-500"), (501, math.inf, ">500"))
#: the run log's share columns (shares.csv), the kinds ``rm/core/shares.py`` defines
SHARE_KINDS = tuple(k.name for k in LOGGED)
PERCENTILES = (50, 90, 99)
#: times closer than this (seconds) are equal even at tolerance 0: run directories keep 6 decimals
TIME_TOLERANCE = 1e-6

RunLike = RunDir | str | Path


def as_run(run: RunLike) -> RunDir:
    """A RunDir for a RunDir or a path (tables are read once, on first use)."""
    return run if isinstance(run, RunDir) else RunDir(Path(run))


# ----- per run ---------------------------------------------------------------------

def job_times(run: RunLike) -> pd.DataFrame:
    """app -> num_tasks, status, submit, queueing_delay, completion_time (NaN when never)."""
    jobs = as_run(run).jobs
    return jobs[["app", "num_tasks", "status", "submit", "queueing_delay",
                 "completion_time"]].set_index("app")


def job_queueing_delay(run: RunLike) -> pd.Series:
    """app -> first task start − arrival, for jobs that started (tsf-paper Fig. 9a)."""
    return job_times(run)["queueing_delay"].dropna()


def job_completion_time(run: RunLike) -> pd.Series:
    """app -> finish − arrival, for jobs that finished (tsf-paper Fig. 9b)."""
    return job_times(run)["completion_time"].dropna()


def task_queueing_delay(run: RunLike) -> pd.Series:
    """(app, task) -> start of the task's first attempt − its submission (tsf-paper Fig. 11a)."""
    t = as_run(run).tasks
    t = t[t["start"].notna()]
    first = t.sort_values(["app", "task", "attempt"], kind="stable").drop_duplicates(["app", "task"])
    index = pd.MultiIndex.from_arrays([first["app"].to_numpy(), first["task"].to_numpy()],
                                      names=["app", "task"])
    return pd.Series((first["start"] - first["submit"]).to_numpy(), index=index, name="delay")


def time_averaged_shares(run: RunLike, t0: float, t1: float,
                         kinds: tuple[str, ...] = SHARE_KINDS) -> pd.DataFrame:
    """app -> (1/(t1 − t0)) ∫_{t0}^{t1} s_i(t) dt per share kind (tsf-paper Fig. 5).

    Row k of an app holds on [t_k, t_{k+1}); its last row holds to t1; an app is 0
    before its first row.
    """
    if not t1 > t0:
        raise ValueError(f"the window needs t1 > t0, got [{t0}, {t1}]")
    s = as_run(run).shares.sort_values(["app", "time"], kind="stable")
    if s.empty:
        return pd.DataFrame(columns=list(kinds), dtype=float)
    times = s["time"].to_numpy()
    last = (s["app"] != s["app"].shift(-1)).to_numpy()
    ends = np.where(last, np.maximum(t1, times), np.roll(times, -1))
    overlap = np.clip(np.minimum(ends, t1) - np.maximum(times, t0), 0.0, None)
    weighted = s[list(kinds)].fillna(0.0).mul(overlap / (t1 - t0), axis=0)
    out = weighted.groupby(s["app"].to_numpy(), sort=True).sum()
    out.index.name = "app"
    return out


def average_share(run: RunLike, app: str, t0: float, t1: float, kind: str = "task_share") -> float:
    """One app's time-averaged ``kind`` share over [t0, t1] (0 if it held nothing)."""
    table = time_averaged_shares(run, t0, t1, (kind,))
    return float(table[kind].get(app, 0.0))


def share_timeline(run: RunLike, kind: str = "task_share") -> pd.DataFrame:
    """A time × app table of ``kind``: the value each app holds from that time on (step function)."""
    s = as_run(run).shares
    wide = s.pivot_table(index="time", columns="app", values=kind, aggfunc="last")
    return wide.ffill().fillna(0.0)


def utilization(run: RunLike) -> pd.DataFrame:
    """Step function of the fraction of each resource in use: columns time and one per dim.

    U_r(t) = Σ_{attempts running at t} d_{app,r} / Σ_m C_{m,r}, with C the capacities in
    nodes.csv; row k holds from its time to the next row's.
    """
    r = as_run(run)
    t = r.tasks[r.tasks["start"].notna()]
    if t.empty:
        return pd.DataFrame(columns=["time", *r.dims], dtype=float)
    end = float(np.nanmax(np.concatenate([t["finish"].to_numpy(), t["start"].to_numpy()])))
    times = np.concatenate([t["start"].to_numpy(), t["finish"].fillna(end).to_numpy()])
    order = np.argsort(times, kind="stable")
    demand = r.jobs.set_index("app")
    out = {"time": times[order]}
    for d in r.dims:
        total = float(r.nodes[d].sum())
        col = f"demand.{d}"
        if total <= 0 or col not in demand.columns:
            continue
        per = demand[col].reindex(t["app"]).fillna(0.0).to_numpy()
        out[d] = np.cumsum(np.concatenate([per, -per])[order]) / total
    frame = pd.DataFrame(out)
    return frame.groupby("time", sort=True).last().reset_index()


def mean_utilization(run: RunLike) -> dict[str, float]:
    """Time average of ``utilization`` from the first start to the last finish, per dim."""
    u = utilization(run)
    if len(u) < 2:
        return {}
    dt = np.diff(u["time"].to_numpy())
    span = u["time"].iloc[-1] - u["time"].iloc[0]
    return {d: float((u[d].to_numpy()[:-1] * dt).sum() / span) if span > 0 else 0.0
            for d in u.columns if d != "time"}


def percentiles(values, qs=PERCENTILES) -> dict[str, float]:
    """{'mean', 'p50', 'p90', 'p99', 'max'} of the non-NaN values ({} when there are none)."""
    v = np.asarray(pd.Series(values, dtype=float).dropna())
    if not len(v):
        return {}
    out = {"mean": float(v.mean())}
    out.update({f"p{q}": float(np.percentile(v, q)) for q in qs})
    out["max"] = float(v.max())
    return out


def run_summary(run: RunLike) -> dict:
    """One flat row: jobs finished/rejected, makespan, and delay percentiles of the run."""
    r = as_run(run)
    jobs, tasks = r.jobs, r.tasks
    finish = tasks["finish"].max() if len(tasks) else math.nan
    row = {"policy": r.label, "jobs": len(jobs),
           "finished": int((jobs["status"] == "finished").sum()),
           "rejected": int((jobs["status"] == "rejected").sum()),
           "makespan": float(finish - jobs["submit"].min()) if len(jobs) and len(tasks) else 0.0}
    for name, values in (("job_delay", job_queueing_delay(r)), ("job_completion", job_completion_time(r)),
                         ("task_delay", task_queueing_delay(r))):
        for k, v in percentiles(values).items():
            row[f"{name}_{k}"] = v
    return row


# ----- the noise floor of a comparison ----------------------------------------------

@dataclass(frozen=True)
class Tolerance:
    """Differences of at most ``seconds`` (trace seconds) count as equal; ``source`` says why."""

    seconds: float
    source: str

    def header(self) -> str:
        """How a table states it: 'tolerance ±1.2 s (…)'."""
        return f"tolerance ±{self.seconds:.3g} s ({self.source})"


def launch_noise(run: RunLike, heartbeat: float | None = None) -> tuple[float, str]:
    """Trace seconds by which a task's start moves in this run for reasons other than the
    policy, and where that figure comes from.

    * an exact simulation: 0 (every start is an event of the model);
    * a simulation with launch jitter X: X (starts move by U(0, X) after allocation);
    * a Ray replay: max(p99 of its allocation-to-running latency in trace seconds, one
      heartbeat interval) — the scheduler runs on node heartbeats (YARN NODE_UPDATE), so
      a container allocated in either of two runs may wait up to one heartbeat for its
      turn, and then the launch latency, neither of which the policy decides.

    The heartbeat interval comes from summary.json (``heartbeat_interval``), else
    ``heartbeat``, else the config default ``run.heartbeat_interval``.
    """
    s = as_run(run).summary
    if s.get("mode", "sim") == "sim":
        jitter = float(s.get("launch_jitter") or 0.0)
        return (jitter, f"launch jitter {jitter:g} s") if jitter > 0 else (0.0, "exact simulation")
    lat = ((s.get("scheduling_latency") or {}).get("allocation_to_running_trace_s") or {}).get("p99")
    beat = s.get("heartbeat_interval", heartbeat)
    beat_text = "heartbeat" if beat is not None else "default heartbeat"
    beat = float(RunSettings.heartbeat_interval if beat is None else beat)
    if lat is not None and float(lat) > beat:
        return float(lat), "replay p99 allocation-to-running latency"
    return beat, f"one {beat_text} interval"


def noise_tolerance(runs, heartbeat: float | None = None, override: float | None = None) -> Tolerance:
    """The tolerance of a comparison of ``runs``: ``override`` when given, else the largest
    ``launch_noise`` of the runs (for a replay the larger of its p99 allocation-to-running
    latency and one heartbeat; 0 between exact simulations)."""
    if override is not None:
        if not override >= 0:
            raise ValueError(f"a tolerance must be >= 0 seconds, got {override}")
        return Tolerance(float(override), "--tolerance")
    noise = [launch_noise(r, heartbeat) for r in runs]
    if not noise:
        return Tolerance(0.0, "exact simulation")
    return Tolerance(*max(noise, key=lambda n: n[0]))


def denoise(differences, tol: float) -> np.ndarray:
    """The differences with every one within ±tol (and ±TIME_TOLERANCE, the 6-decimal
    rounding of a run directory) set to exactly 0: a difference counts only beyond the noise."""
    v = np.asarray(differences, dtype=float)
    return np.where(np.abs(v) <= max(float(tol), TIME_TOLERANCE), 0.0, v)


# ----- TSF against another policy ---------------------------------------------------

def size_bin(num_tasks: int) -> str:
    """The job-size bin of tsf-paper Fig. 10: '<=10', '11-100', '101-500' or '>500'."""
    return next(label for lo, hi, label in SIZE_BINS if lo <= num_tasks <= hi)


def job_speedups(tsf: RunLike, other: RunLike, tol: float = 0.0) -> pd.DataFrame:
    """Per job finished in both runs: num_tasks, bin, speedup_s = C_P − C_TSF, speedup = that / C_P.

    tsf-paper §VI-B2: "per-job speedup is ... the difference between its completion
    time using an alternative algorithm and TSF"; the relative form is what "10%
    faster" means.  Positive: TSF finished the job sooner.  A difference within ±tol
    seconds is noise and counts as 0 (``denoise``); ``raw_speedup_s`` keeps it.
    """
    a, b = job_times(tsf), job_times(other)
    both = a.merge(b, left_index=True, right_index=True, how="inner", suffixes=("", "_p"))
    both = both.dropna(subset=["completion_time", "completion_time_p"])
    cp = both["completion_time_p"]
    raw = cp - both["completion_time"]
    out = pd.DataFrame({"num_tasks": both["num_tasks"].astype(int),
                        "tsf": both["completion_time"], "other": cp, "raw_speedup_s": raw,
                        "speedup_s": denoise(raw, tol)})
    out["speedup"] = np.where(cp > 0, out["speedup_s"] / cp.where(cp > 0, 1.0), 0.0)
    out["bin"] = [size_bin(int(n)) for n in out["num_tasks"]]
    return out


def speedup_by_size(speedups: pd.DataFrame) -> pd.DataFrame:
    """bin -> jobs; jobs TSF finishes sooner / equally / later (beyond the tolerance
    ``job_speedups`` applied); mean/std (ddof 0) of relative speedup and of speedup in
    seconds (Fig. 10)."""
    rows = []
    for _, _, label in SIZE_BINS:
        g = speedups[speedups["bin"] == label]
        n = len(g)
        rows.append({"bin": label, "jobs": n,
                     "faster": int((g["speedup_s"] > 0).sum()), "equal": int((g["speedup_s"] == 0).sum()),
                     "slower": int((g["speedup_s"] < 0).sum()),
                     "mean_speedup": float(g["speedup"].mean()) if n else math.nan,
                     "std_speedup": float(g["speedup"].std(ddof=0)) if n else math.nan,
                     "mean_speedup_s": float(g["speedup_s"].mean()) if n else math.nan,
                     "std_speedup_s": float(g["speedup_s"].std(ddof=0)) if n else math.nan})
    return pd.DataFrame(rows).set_index("bin")


def task_speedups(tsf: RunLike, other: RunLike, tol: float = 0.0) -> pd.Series:
    """(app, task) -> D_P − D_TSF, the reduction of task queueing delay by TSF (Fig. 11b),
    0 where it is within ±tol seconds (``denoise``)."""
    a, b = task_queueing_delay(tsf), task_queueing_delay(other)
    both = pd.concat([a.rename("tsf"), b.rename("other")], axis=1, join="inner")
    return pd.Series(denoise(both["other"] - both["tsf"], tol), index=both.index, name="speedup")


def task_speedup_fractions(speedups: pd.Series, tol: float = 0.0) -> dict[str, float]:
    """Fractions of tasks whose queueing delay TSF shortens (by more than tol), leaves
    equal (within ±tol), lengthens (by more than tol)."""
    v = denoise(speedups.to_numpy(dtype=float), tol)
    n = len(v)
    if not n:
        return {"tasks": 0, "shortened": math.nan, "equal": math.nan, "lengthened": math.nan}
    return {"tasks": n, "shortened": float((v > 0).sum() / n), "equal": float((v == 0).sum() / n),
            "lengthened": float((v < 0).sum() / n)}


def comparison_table(runs: dict[str, RunLike], baseline: str = "tsf",
                     tol: Tolerance | None = None) -> pd.DataFrame:
    """One row per policy (the dict's keys): ``run_summary`` plus, against ``baseline``,
    the per-task speedup fractions and the mean relative per-job speedup per size bin,
    differences within the tolerance (default ``noise_tolerance`` of the runs) counting
    as equal.  The tolerance is in ``table.attrs['tolerance']`` and column ``tolerance_s``."""
    runs = {k: as_run(v) for k, v in runs.items()}
    tol = tol or noise_tolerance(runs.values())
    rows = []
    base = runs.get(baseline)
    for label, r in runs.items():
        row = run_summary(r)
        row["policy"] = label
        if base is not None and label != baseline:
            frac = task_speedup_fractions(task_speedups(base, r, tol.seconds))
            row.update({f"tasks_{baseline}_{k}": v for k, v in frac.items() if k != "tasks"})
            bins = speedup_by_size(job_speedups(base, r, tol.seconds))
            for label_bin, b in bins.iterrows():
                row[f"job_speedup_{label_bin}"] = b["mean_speedup"]
        row["tolerance_s"] = tol.seconds
        rows.append(row)
    table = pd.DataFrame(rows).set_index("policy")
    table.attrs["tolerance"] = tol
    return table
