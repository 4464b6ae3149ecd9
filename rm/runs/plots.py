"""The PNG plots of ``rayrm report`` (matplotlib, Agg backend; see ``rayrm.rm.runs.report`` for the metrics).

One file per figure: ``shares_<run>.png`` (tsf-paper Fig. 5), with a queue tree
``queues_<run>.png`` (each queue's share against what it is owed), with preemption
``preemptions_<run>.png`` (containers preempted per queue over time), ``utilization.png``,
``cdf_job_queueing_delay.png`` (Fig. 9a), ``cdf_job_completion_time.png`` (Fig. 9b),
``cdf_task_queueing_delay.png`` (Fig. 11a), and with a TSF comparison
``speedup_by_job_size.png`` (Fig. 10) and ``task_speedup_cdf.png`` (Fig. 11b; the
tolerance band ±tol drawn, differences within it at 0), and for policies compared
in both modes ``sim_vs_ray.png`` (simulator against Ray, one panel per pair).
Large CDFs are drawn through 2,000 quantiles; that changes no visible step.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from rayrm.rm.runs import metrics as M  # noqa: E402
from rayrm.rm.runs.queues import preemption_times, run_queue_history  # noqa: E402

CDF_POINTS = 2000


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", label).strip("_") or "run"


def _cdf(ax, values, label: str) -> None:
    v = np.sort(np.asarray(values, dtype=float))
    v = v[~np.isnan(v)]
    if not len(v):
        return
    y = np.arange(1, len(v) + 1) / len(v)
    if len(v) > CDF_POINTS:
        idx = np.unique(np.linspace(0, len(v) - 1, CDF_POINTS).astype(int))
        v, y = v[idx], y[idx]
    ax.step(v, y, where="post", label=label)


def _save(fig, out: Path, name: str, title: str, images: list) -> None:
    fig.tight_layout()
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    images.append((title, name))


def _shares(rep, run, label, out, images, max_apps: int) -> None:
    s = run.shares
    if s.empty:
        return
    peak = s.groupby("app")["task_share"].max().sort_values(ascending=False)
    apps = sorted(peak.index[:max_apps], key=str)
    fig, axes = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
    for ax, kind, name in zip(axes, ("task_share", "cpu_share", "mem_share"),
                              ("task share", "CPU share", "memory share")):
        for app in apps:
            g = s[s["app"] == app].sort_values("time", kind="stable")
            ax.step(g["time"], g[kind], where="post", label=str(app))
        ax.set_ylabel(name)
        ax.set_ylim(bottom=0)
    axes[-1].set_xlabel("time (s)")
    axes[0].legend(fontsize=7, ncol=4, loc="upper right")
    more = f" ({len(apps)} of {len(peak)} apps, largest peak task share)" if len(peak) > len(apps) else ""
    axes[0].set_title(f"{label}: shares over time{more}")
    _save(fig, out, f"shares_{_slug(label)}.png", f"Share timelines, {label} (tsf-paper Fig. 5)", images)


def _queues(run, label, out, images, most: int = 12) -> None:
    """Each queue's share of the cluster (solid) against what it is owed (dashed), as steps
    (``rayrm.rm.runs.queues``); the top-level queues and the leaves, at most ``most``."""
    series = run_queue_history(run)
    if not series:
        return
    names = [q for q in series if q.count(".") == 1 or not any(o.startswith(q + ".") for o in series)][:most]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    for k, q in enumerate(names):
        t, share, owed = zip(*series[q])
        color = f"C{k % 10}"
        ax.step(t, share, where="post", color=color, label=q)
        ax.step(t, owed, where="post", color=color, linestyle="--", linewidth=0.9)
    _over_time(ax, "share of the cluster", "upper right",
               f"{label}: each queue's share (solid) and what it is owed (dashed)")
    _save(fig, out, f"queues_{_slug(label)}.png", f"Queue shares against what each is owed, {label}", images)


def _over_time(ax, ylabel: str, legend_at: str, title: str) -> None:
    """The frame of a per-queue chart over trace time: axes from 0, a legend, a title."""
    ax.set_xlabel("time (s)")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, ncol=3, loc=legend_at)
    ax.set_title(title, fontsize=9)


def _preemptions(run, label, out, images) -> None:
    """Containers preempted from each queue so far, over time (``preemptions_<run>.png``)."""
    times = preemption_times(run)
    if not times:
        return
    fig, ax = plt.subplots(figsize=(8, 3.2))
    for k, (q, t) in enumerate(sorted(times.items())):
        ax.step(np.concatenate([[0.0], t]), np.arange(len(t) + 1), where="post", color=f"C{k % 10}", label=q)
    _over_time(ax, "containers preempted", "upper left", f"{label}: containers preempted from each queue")
    _save(fig, out, f"preemptions_{_slug(label)}.png", f"Preemptions per queue over time, {label}", images)


def _utilization(rep, out, images) -> None:
    series = [(label, M.utilization(run)) for run, label in zip(rep.runs, rep.labels)]
    dims = sorted({d for _, u in series for d in u.columns if d != "time"})
    if not dims:
        return
    fig, axes = plt.subplots(len(dims), 1, figsize=(8, 2.6 * len(dims)), sharex=True, squeeze=False)
    for ax, d in zip(axes[:, 0], dims):
        for label, util in series:
            if d in util.columns:
                ax.step(util["time"], util[d], where="post", label=label)
        ax.set_ylabel(f"{d} in use")
        ax.set_ylim(0, 1.05)
    axes[-1, 0].set_xlabel("time (s)")
    axes[0, 0].legend(fontsize=8)
    _save(fig, out, "utilization.png", "Utilization over time", images)


def _delay_cdfs(rep, out, images) -> None:
    sources = [
        ("job_queueing_delay", "job queueing delay (s)", "Fig. 9a",
         lambda r: r.jobs["queueing_delay"]),
        ("job_completion_time", "job completion time (s)", "Fig. 9b",
         lambda r: r.jobs["completion_time"]),
        ("task_queueing_delay", "task queueing delay (s)", "Fig. 11a", M.task_queueing_delay),
    ]
    for name, xlabel, fig_ref, values in sources:
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for run, label in zip(rep.runs, rep.labels):
            _cdf(ax, values(run), label)
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("CDF")
        ax.set_ylim(0, 1.01)
        ax.legend(fontsize=8)
        _save(fig, out, f"cdf_{name}.png", f"CDF of {xlabel[:-4]} (tsf-paper {fig_ref})", images)


def _speedups(rep, out, images) -> None:
    if not rep.speedups:
        return
    bins = [b for _, _, b in M.SIZE_BINS]
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / len(rep.speedups)
    for k, (label, per_job) in enumerate(rep.speedups.items()):
        table = M.speedup_by_size(per_job).reindex(bins)
        x = np.arange(len(bins)) + (k - (len(rep.speedups) - 1) / 2) * width
        ax.bar(x, 100 * table["mean_speedup"], width, yerr=100 * table["std_speedup"],
               capsize=3, label=f"vs {label}")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(np.arange(len(bins)), [f"{b} tasks" for b in bins])
    ax.set_ylabel("speedup of TSF (%)")
    ax.legend(fontsize=8)
    _save(fig, out, "speedup_by_job_size.png",
          "Per-job speedup of TSF by job size, mean ± std (tsf-paper Fig. 10)", images)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for label, s in rep.task_speedups.items():
        _cdf(ax, s.to_numpy(), f"vs {label}")
    ax.axvline(0, color="black", linewidth=0.8)
    tol = rep.tolerance.seconds
    if tol > 0:
        ax.axvspan(-tol, tol, color="grey", alpha=0.2, label=f"±{tol:.3g} s: equal")
        ax.legend(fontsize=8)
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlabel("task queueing delay saved by TSF (s)")
    ax.set_ylabel("CDF")
    ax.legend(fontsize=8)
    _save(fig, out, "task_speedup_cdf.png", "Per-task speedup of TSF, CDF (tsf-paper Fig. 11b)", images)


def _sim_vs_ray(rep, out, images) -> None:
    if not rep.sim_vs_ray:
        return
    pairs = list(rep.sim_vs_ray.items())
    fig, axes = plt.subplots(len(pairs), 1, figsize=(8, 3.4 * len(pairs)), squeeze=False)
    for ax, (policy, rows) in zip(axes[:, 0], pairs):
        x = np.arange(len(rows))
        for k, (mode, name) in enumerate((("sim", "simulator"), ("ray", "Ray"))):
            values = np.array([np.nan if r[mode] is None else 100 * r[mode] for r in rows], dtype=float)
            ax.bar(x + (k - 0.5) * 0.4, values, 0.4, label=name)
        for i, r in enumerate(rows):
            if r["differs"]:
                ax.annotate("≠", (i, 0), xytext=(0, -14), textcoords="offset points", ha="center", color="red")
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xticks(x, [r["label"].replace("tsf ", "TSF ").replace("job speedup ", "speedup\n")
                          for r in rows], fontsize=8)
        ax.set_ylabel("%")
        ax.set_title(f"TSF vs {policy}: simulator against Ray ({rep.tolerance.header()})", fontsize=9)
        ax.legend(fontsize=8)
    _save(fig, out, "sim_vs_ray.png",
          "Simulator against Ray: task shares and per-job speedup by size, per policy pair "
          "(≠: the conclusion differs)", images)


def draw_all(rep, out: Path, max_apps: int = 8) -> list[tuple[str, str]]:
    """Draw every figure the runs allow into ``out``; returns (title, file name) pairs."""
    images: list[tuple[str, str]] = []
    for run, label in zip(rep.runs, rep.labels):
        _shares(rep, run, label, out, images, max_apps)
        _queues(run, label, out, images)
        _preemptions(run, label, out, images)
    _utilization(rep, out, images)
    _delay_cdfs(rep, out, images)
    _speedups(rep, out, images)
    _sim_vs_ray(rep, out, images)
    return images
