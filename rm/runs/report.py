"""``rayrm report RUN_DIR...``: the tables and plots of tsf-paper §VI from run directories.

Everything is computed from the run directories alone (docs/design.md principle 3), so a
simulated run and a Ray run of the same trace are compared by the same code.

Per run:

* **share timelines** (tsf-paper Fig. 5): task share n_i/(h_i w_i), CPU share and
  memory share of each app over time, as step functions from shares.csv;
* **time-averaged shares** over a window [t0, t1] (default: first submit to last
  finish): (1/(t1 − t0)) ∫ s_i(t) dt, exact because shares.csv has a row at every change;
* **utilization** over time: U_r(t) = Σ_{attempts a running at t} d_{app(a), r} / Σ_m C_{m,r};
* CDFs (one line per run) of **job queueing delay** (first task start − job arrival),
  **job completion time** (finish − arrival) and **task queueing delay** (start of a
  task's first attempt − its submission) — tsf-paper Fig. 9a, 9b, 11a.

When runs of several policies on the same trace (same apps and task counts) and mode
(simulator or Ray) include a ``tsf`` run, for each other policy P of that mode:

* **per-job speedup** (tsf-paper Fig. 10), binned by job size (<= 10, 11–100, 101–500,
  > 500 tasks), mean ± std: the paper defines it as the difference between a job's
  completion time under P and under TSF; the table gives that difference in seconds and
  relative to P, (C_P − C_TSF) / C_P, which is what "10% faster" means;
* **per-task speedup** (tsf-paper Fig. 11b): the reduction of task queueing delay,
  D_P − D_TSF, per task; its CDF, and the fractions of tasks TSF shortens, leaves
  equal, lengthens (the paper: TSF shortens about 60% against each alternative).

Differences within one **tolerance** count as equal in all of these (CDF included: a
difference within it is drawn as 0): ``--tolerance``, else the largest launch noise of the
runs (``rayrm.rm.runs.metrics.noise_tolerance``: 0 between exact simulations, a replay's
p99 allocation-to-running latency or one heartbeat).  The page states it.

When a pair (TSF, P) was run both in the simulator and on Ray, the page shows the two
side by side — a table and a bar plot, simulator against Ray, per pair — and flags
every conclusion that differs (``rayrm.rm.runs.compare.differs``: a per-job speedup of
another sign, a share of tasks that moves more than 5 points).

The numbers come from ``rayrm.rm.runs.metrics``; this module lays them out.  Output (``--out``,
default ``<first run>/report/``): PNGs (``rayrm.rm.runs.plots``),
``index.html`` with the tables, and ``tables.json`` with the same numbers.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from rayrm.rm.core.errors import InputError
from rayrm.rm.runs import metrics as M
from rayrm.rm.runs.compare import conclusion_columns, differs
from rayrm.rm.runs.queues import preemptions
from rayrm.rm.runs.reader import RunDir

# The metrics themselves are rm.metrics (one definition for compare, report and tests).
SIZE_BINS, SHARE_KINDS = M.SIZE_BINS, M.SHARE_KINDS
MAX_SHARE_ROWS = 100        # apps kept in the time-averaged share table (largest task share first)


# ----- the report ----------------------------------------------------------------

@dataclass
class Report:
    """The numbers of a report: per-run summaries, shares, and TSF comparisons."""

    runs: list[RunDir]
    labels: list[str]
    window: tuple[float, float] | None = None
    tolerance: M.Tolerance = M.Tolerance(0.0, "exact simulation")
    tables: dict = field(default_factory=dict)
    speedups: dict[str, pd.DataFrame] = field(default_factory=dict)       # label -> per-job
    task_speedups: dict[str, pd.Series] = field(default_factory=dict)     # label -> per-task
    sim_vs_ray: dict[str, list[dict]] = field(default_factory=dict)       # policy -> metric rows


def _mode(run: RunDir) -> str:
    return str(run.summary.get("mode") or "sim")


def _labels(runs: list[RunDir]) -> list[str]:
    """The policy; 'policy (mode)' when the mode tells apart runs of one policy; else
    'policy (directory name)'."""
    base = [r.label for r in runs]
    with_mode = [(b, _mode(r)) for b, r in zip(base, runs)]
    return [b if base.count(b) == 1 else f"{b} ({m})" if with_mode.count((b, m)) == 1
            else f"{b} ({r.path.name})" for b, m, r in zip(base, (m for _, m in with_mode), runs)]


def _fingerprint(run: RunDir) -> tuple:
    return tuple(sorted(zip(run.jobs["app"], run.jobs["num_tasks"].astype(int))))


def build_report(paths, window: tuple[float, float] | None = None, tolerance: float | None = None) -> Report:
    """Read the runs and compute every table; raises InputError on an unreadable run.
    ``tolerance``: seconds within which differences count as equal (default: the runs' own)."""
    runs = [RunDir(p) for p in paths]
    if not runs:
        raise InputError("needs at least one run directory", field="RUN_DIR")
    rep = Report(runs, _labels(runs), window, M.noise_tolerance(runs, override=tolerance))
    rep.tables["tolerance"] = {"seconds": rep.tolerance.seconds, "source": rep.tolerance.source}
    summary, shares = [], {}
    for run, label in zip(runs, rep.labels):
        jobs = run.jobs
        tasks = run.tasks
        finish = tasks["finish"].max() if len(tasks) else math.nan
        t0 = window[0] if window else float(jobs["submit"].min()) if len(jobs) else 0.0
        t1 = window[1] if window else float(finish) if not math.isnan(finish) else t0
        row = {"run": label, "path": str(run.path), "mode": run.summary.get("mode", ""),
               "jobs": len(jobs), "finished": int((jobs["status"] == "finished").sum()),
               "rejected": int((jobs["status"] == "rejected").sum()),
               "tasks": int(jobs["num_tasks"].sum()), "attempts": len(tasks),
               "makespan": float(finish - jobs["submit"].min()) if len(jobs) and len(tasks) else 0.0,
               "job_queueing_delay": M.percentiles(M.job_queueing_delay(run)),
               "job_completion_time": M.percentiles(M.job_completion_time(run)),
               "task_queueing_delay": M.percentiles(M.task_queueing_delay(run)),
               "utilization": M.mean_utilization(run)}
        summary.append(row)
        if t1 > t0 and len(run.shares):
            table = M.time_averaged_shares(run, t0, t1).sort_values("task_share", ascending=False)
            shares[label] = {"window": [t0, t1], "apps_total": len(table),
                             "apps": table.head(MAX_SHARE_ROWS).to_dict(orient="index")}
    rep.tables["runs"] = summary
    rep.tables["time_averaged_shares"] = shares
    costs = {label: json.loads((run.path / "faults.json").read_text())
             for run, label in zip(runs, rep.labels) if (run.path / "faults.json").exists()}
    if costs:
        rep.tables["faults"] = costs
    _compare(rep)
    return rep


def _compare(rep: Report) -> None:
    """Fig. 10 and Fig. 11b tables for every non-TSF run against the TSF run of its trace
    and mode; then the simulator against Ray for each policy compared in both modes."""
    tol = rep.tolerance.seconds
    bases = {}
    for run, label in zip(rep.runs, rep.labels):
        if run.label == "tsf":
            bases.setdefault((_fingerprint(run), _mode(run)), (run, label))
    by_bin, per_task, pairs = {}, {}, {}
    for run, label in zip(rep.runs, rep.labels):
        found = bases.get((_fingerprint(run), _mode(run)))
        if run.label == "tsf" or found is None:
            continue
        base, base_label = found
        rep.speedups[label] = M.job_speedups(base, run, tol)
        bins = M.speedup_by_size(rep.speedups[label])
        by_bin[label] = bins.reset_index().to_dict(orient="records")
        s = rep.task_speedups[label] = M.task_speedups(base, run, tol)
        per_task[label] = M.task_speedup_fractions(s, tol) | {"median_s": float(s.median()) if len(s) else math.nan,
                                                             "baseline": base_label}
        values = {f"tasks_tsf_{k}": per_task[label][k] for k in ("shortened", "equal", "lengthened")}
        values.update({f"job_speedup_{b}": row["mean_speedup"] for b, row in bins.iterrows()})
        pairs.setdefault(run.label, {}).setdefault(_mode(run), values)
    if by_bin:
        rep.tables["baseline"] = ", ".join(sorted({v["baseline"] for v in per_task.values()}))
        rep.tables["job_speedup_by_size"] = by_bin
        rep.tables["task_speedup"] = per_task
    for policy, modes in pairs.items():
        if {"sim", "ray"} <= set(modes):
            rep.sim_vs_ray[policy] = [
                {"metric": col, "label": name, "sim": modes["sim"][col], "ray": modes["ray"][col],
                 "differs": differs(col, modes["sim"][col], modes["ray"][col])}
                for col, name, _ in conclusion_columns("tsf")]
    if rep.sim_vs_ray:
        rep.tables["sim_vs_ray"] = rep.sim_vs_ray


# ----- writing -------------------------------------------------------------------

def _fmt(x) -> str:
    if isinstance(x, float):
        return "" if math.isnan(x) else f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"
    return html.escape(str(x))


def _pct(x) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def _table(header: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _fault_tables(costs: dict) -> list[str]:
    """What each fault of a replay cost (its faults.json, rm/runs/recovery.py): a table per run."""
    parts = []
    for label, c in costs.items():
        avail = "-" if c.get("availability") is None else f"{c['availability']:.1%}"
        parts.append(f"<h2>Faults, {html.escape(label)}</h2><p>availability (share of node-seconds "
                     f"usable) {avail}; times are trace seconds after the fault (wall seconds).</p>")
        parts.append(_table(["fault", "at", "detected", "recovered", "detected (wall)", "recovered (wall)",
                             "attempts lost", "work lost (task-s)"],
                            [["-" if v is None else v for v in (
                                r["fault"], r["time"], r["detected"], r["recovered"], r["detected_wall"],
                                r["recovered_wall"], r["lost_attempts"], r.get("work_lost", 0.0))]
                             for r in c.get("faults", [])]))
    return parts


def render_html(rep: Report, images: list[tuple[str, str]]) -> str:
    """index.html: the tables, then the plots (``images``: (title, file name))."""
    t = rep.tables
    parts = ["<!doctype html><meta charset='utf-8'><title>rayrm report</title>",
             "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}img{max-width:48%}</style>",
             "<h1>rayrm report</h1><h2>Runs</h2>"]
    metrics = ("job_queueing_delay", "job_completion_time", "task_queueing_delay")
    parts.append(_table(
        ["run", "mode", "jobs", "finished", "rejected", "tasks", "attempts", "makespan (s)"]
        + [f"{m.replace('_', ' ')} {q}" for m in metrics for q in ("mean", "p50", "p90", "p99")]
        + ["utilization"],
        [[r["run"], r["mode"], r["jobs"], r["finished"], r["rejected"], r["tasks"], r["attempts"],
          r["makespan"]] + [r[m].get(q, math.nan) for m in metrics for q in ("mean", "p50", "p90", "p99")]
         + [", ".join(f"{d} {u:.1%}" for d, u in r.get("utilization", {}).items())] for r in t["runs"]]))
    if "job_speedup_by_size" in t:
        tol = html.escape(rep.tolerance.header())
        parts.append(f"<h2>Per-job speedup of TSF ({html.escape(t['baseline'])}) by job size "
                     "(tsf-paper Fig. 10)</h2><p>speedup = (C<sub>P</sub> − C<sub>TSF</sub>) / "
                     f"C<sub>P</sub>; mean ± std over the jobs of each bin; {tol}: a job whose "
                     "completion times differ by no more counts as equal (speedup 0).</p>")
        parts.append(_table(["vs", "bin", "jobs", "TSF faster", "equal", "TSF slower", "mean", "std",
                             "mean (s)", "std (s)"],
                            [[p, b["bin"], b["jobs"], b["faster"], b["equal"], b["slower"], b["mean_speedup"],
                              b["std_speedup"], b["mean_speedup_s"], b["std_speedup_s"]]
                             for p, bins in t["job_speedup_by_size"].items() for b in bins]))
        parts.append("<h2>Per-task speedup: D<sub>P</sub> − D<sub>TSF</sub> (tsf-paper Fig. 11b)</h2>"
                     f"<p>{tol}: a task whose queueing delays differ by no more counts as equal.</p>")
        parts.append(_table(["vs", "tasks", "TSF shorter", "equal", "TSF longer", "median (s)"],
                            [[p, v["tasks"], v["shortened"], v["equal"], v["lengthened"], v["median_s"]]
                             for p, v in t["task_speedup"].items()]))
    if rep.sim_vs_ray:
        parts.append("<h2>Simulator against Ray</h2><p>The same comparisons from the simulated and the "
                     f"replayed runs, {html.escape(rep.tolerance.header())} in both; a conclusion differs "
                     "when a per-job speedup changes sign or a share of tasks moves more than 5 points.</p>")
        parts.append(_table(["TSF vs", "metric", "simulator", "Ray", "differs"],
                            [[p, r["label"], _pct(r["sim"]), _pct(r["ray"]), r["differs"]]
                             for p, rows in rep.sim_vs_ray.items() for r in rows]))
    for label, sh in t["time_averaged_shares"].items():
        t0, t1 = sh["window"]
        apps = list(sh["apps"].items())[:20]
        more = f" (20 of {sh['apps_total']} apps, largest task share first)" if sh["apps_total"] > 20 else ""
        parts.append(f"<h2>Time-averaged shares, {html.escape(label)}, t in [{t0:g}, {t1:g}]{more}</h2>")
        parts.append(_table(["app", *SHARE_KINDS], [[a, *(v[k] for k in SHARE_KINDS)] for a, v in apps]))
    parts += _fault_tables(t.get("faults", {}))
    for run, label in zip(rep.runs, rep.labels):
        pre = preemptions(run)
        if len(pre):
            parts.append(f"<h2>Preemption, {html.escape(label)}</h2><p>per queue: containers preempted from "
                         "it, the task-seconds they had run, starvation episodes and their mean time to share "
                         "restored (docs/preemption.md)</p>")
            parts.append(_table(["queue", "preempted", "lost task-s", "starved", "restored after (s)"],
                                pre.values.tolist()))
    parts.append("<h2>Plots</h2>")
    parts += [f"<figure><img src='{html.escape(f)}'><figcaption>{html.escape(title)}</figcaption></figure>"
              for title, f in images]
    return "\n".join(parts) + "\n"


def write_report(paths, out: str | Path | None = None, window=None, max_apps: int = 8,
                 tolerance: float | None = None) -> tuple[Path, Report]:
    """Compute the report and write PNGs, index.html and tables.json to ``out``."""
    from rayrm.rm.runs.plots import draw_all  # noqa: PLC0415 (matplotlib only here)

    rep = build_report(paths, window, tolerance)
    out = Path(out) if out else rep.runs[0].path / "report"
    try:
        out.mkdir(parents=True, exist_ok=True)
        images = draw_all(rep, out, max_apps=max_apps)
        (out / "index.html").write_text(render_html(rep, images))
        (out / "tables.json").write_text(json.dumps(_plain(rep.tables), indent=2) + "\n")
    except OSError as e:
        raise InputError(f"cannot write the report: {e.strerror}", file=str(out)) from None
    return out, rep


def _plain(x):
    """JSON-ready: numpy scalars as Python numbers, NaN as null."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return None if math.isnan(x) else float(x)
    return x
