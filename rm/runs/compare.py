"""The table that compares policies run on one trace and seed (tsf-paper §VI-B).

``write_comparison(dirs, out)`` reads the run directories ``dirs`` (policy -> path; running
them is ``rayrm.rm.cli.compare``'s job) and writes, from them alone (``rayrm.rm.runs.metrics``):

* ``comparison.csv`` — per policy: makespan, job queueing delay and job completion
  time percentiles (Fig. 9), task queueing delay percentiles (Fig. 11a), and against
  TSF the fractions of tasks whose queueing delay TSF shortens / leaves equal /
  lengthens (Fig. 11b; per-task speedup = D_P − D_TSF) and the mean relative per-job
  speedup (C_P − C_TSF)/C_P per job-size bin (Fig. 10);
* ``job_speedup_by_size.csv`` — the Fig. 10 table in full: per alternative and bin,
  jobs, mean and std of the relative and absolute speedup.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from rayrm.rm.runs import metrics

BASELINE = "tsf"


#: the conclusions a comparison draws against the baseline, (column, label, is a share)
def conclusion_columns(baseline: str = BASELINE) -> list[tuple[str, str, bool]]:
    return ([(f"tasks_{baseline}_shortened", f"{baseline} shortens", True),
             (f"tasks_{baseline}_equal", "equal", True),
             (f"tasks_{baseline}_lengthened", "lengthens", True)]
            + [(f"job_speedup_{b}", f"job speedup {b}", False) for _, _, b in metrics.SIZE_BINS])


#: a share of tasks that moves by more than this between two modes is a different conclusion
SHARE_POINTS = 0.05


def comparison(dirs: dict[str, Path], baseline: str = BASELINE,
               tol: metrics.Tolerance | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(comparison table, per-size-bin speedup table) from the run directories, differences
    within ``tol`` (default: ``metrics.noise_tolerance`` of these runs) counting as equal."""
    runs = {p: metrics.as_run(d) for p, d in dirs.items()}
    tol = tol or metrics.noise_tolerance(runs.values())
    table = metrics.comparison_table(runs, baseline=baseline, tol=tol)
    bins = []
    if baseline in runs:
        for p, r in runs.items():
            if p == baseline:
                continue
            b = metrics.speedup_by_size(metrics.job_speedups(runs[baseline], r, tol.seconds)).reset_index()
            b.insert(0, "policy", p)
            bins.append(b)
    by_size = pd.concat(bins, ignore_index=True) if bins else pd.DataFrame()
    return table, by_size


# ----- several replicas (seeds, repeated replays) and two modes ---------------------

def interval(values) -> dict[str, float]:
    """n, mean, 95% confidence half-width (Student t), min and max of the non-NaN values.

    ci95 = t_{0.975, n−1} · s / √n with s the sample standard deviation (ddof 1) —
    the interval of a mean over n independent seeds (tsf-paper §VI-B averages 50
    simulations); NaN for n < 2.
    """
    v = np.asarray(pd.Series(values, dtype=float).dropna())
    n = len(v)
    if not n:
        return {"n": 0, "mean": math.nan, "ci95": math.nan, "min": math.nan, "max": math.nan}
    half = math.nan
    if n >= 2:
        from scipy.stats import t  # noqa: PLC0415 (scipy only for several replicas)
        half = float(t.ppf(0.975, n - 1) * v.std(ddof=1) / math.sqrt(n))
    return {"n": n, "mean": float(v.mean()), "ci95": half, "min": float(v.min()), "max": float(v.max())}


def replica_stats(tables: list[pd.DataFrame], baseline: str = BASELINE) -> pd.DataFrame:
    """Per (policy, metric) of ``conclusion_columns``: ``interval`` over the replicas'
    comparison tables (one per seed or repeated replay)."""
    rows = []
    policies = [p for p in tables[0].index if p != baseline] if tables else []
    for p in policies:
        for col, label, _ in conclusion_columns(baseline):
            values = [t.loc[p, col] for t in tables if p in t.index and col in t.columns]
            rows.append({"policy": p, "metric": col, "label": label, **interval(values)})
    return pd.DataFrame(rows, columns=["policy", "metric", "label", "n", "mean", "ci95", "min", "max"])


def differs(metric: str, sim: float, ray: float, baseline: str = BASELINE) -> str:
    """Why the two modes draw different conclusions on ``metric`` ('' when they agree):
    a per-job speedup of another sign, or a share of tasks that moves more than 5 points."""
    if math.isnan(sim) or math.isnan(ray):
        return ""
    if metric.startswith("job_speedup_"):
        return "sign differs" if np.sign(sim) != np.sign(ray) else ""
    moved = ray - sim
    return f"moves {100 * moved:+.1f} pts" if abs(moved) > SHARE_POINTS else ""


def sim_vs_ray(sim: pd.DataFrame, ray: pd.DataFrame, baseline: str = BASELINE) -> pd.DataFrame:
    """``replica_stats`` of both modes side by side, one row per (policy, metric), with
    ``differs`` for each."""
    both = sim.merge(ray, on=["policy", "metric", "label"], suffixes=("_sim", "_ray"), how="left", sort=False)
    both["differs"] = [differs(m, s, r, baseline)
                       for m, s, r in zip(both["metric"], both["mean_sim"], both["mean_ray"])]
    return both


def format_stats(stats: pd.DataFrame, title: str) -> str:
    """One mode's replica statistics: mean, 95% CI and range per policy and metric."""
    lines = [title]
    for _, r in stats.iterrows():
        lines.append(f"  vs {r['policy']:<9} {r['label']:<22} {_cell(r, '')}")
    return "\n".join(lines)


def format_sim_vs_ray(both: pd.DataFrame) -> str:
    """The side-by-side table: simulator | Ray | the conclusion that differs, if any."""
    cells = [(_cell(r, "_sim"), _cell(r, "_ray")) for _, r in both.iterrows()]
    w = max([9, *(len(c) for pair in cells for c in pair)])
    lines = [f"{'vs policy':<10} {'metric':<20} {'simulator':>{w}} {'Ray':>{w}}  differs"]
    for (_, r), (sim, ray) in zip(both.iterrows(), cells):
        lines.append(f"{r['policy']:<10} {r['label']:<20} {sim:>{w}} {ray:>{w}}  {r['differs']}".rstrip())
    flagged = int((both["differs"] != "").sum())
    lines.append(f"{flagged} conclusion(s) differ between the simulator and Ray" if flagged else
                 "every conclusion agrees (per-job speedup signs; task shares within 5 points)")
    return "\n".join(lines)


def _cell(row, suffix: str) -> str:
    """'27.2%', or with several replicas '27.2% ±1.1 [25.0, 29.0] n=5' (percent)."""
    mean, n = row[f"mean{suffix}"], row[f"n{suffix}"]
    if pd.isna(mean):
        return "-"
    text = f"{100 * mean:.1f}%"
    if n >= 2:
        text += f" ±{100 * row[f'ci95{suffix}']:.1f} [{100 * row[f'min{suffix}']:.1f}, {100 * row[f'max{suffix}']:.1f}] n={int(n)}"
    return text


def format_table(table: pd.DataFrame, baseline: str = BASELINE) -> str:
    """The comparison as two fixed-width text tables (performance; TSF against each),
    the second headed by the tolerance it used."""
    perf_cols = [("makespan", "makespan", 0), ("job_delay_p50", "job delay p50", 1),
                 ("job_delay_p90", "p90", 1), ("job_completion_p50", "job compl p50", 1),
                 ("job_completion_p90", "p90", 1), ("task_delay_mean", "task delay mean", 1),
                 ("task_delay_p50", "p50", 1), ("task_delay_p90", "p90", 1)]
    lines = [_fixed(table, perf_cols, "policy")]
    speed_cols = [(col, label, "%") for col, label, _ in conclusion_columns(baseline)]
    others = table[table.index != baseline]
    if len(others) and speed_cols[0][0] in others.columns:
        tol = table.attrs.get("tolerance")
        lines.append("")
        lines.append(f"per-task speedup of {baseline} (reduction of task queueing delay, Fig. 11b) "
                     f"and mean per-job speedup (C_P - C_{baseline}) / C_P by job size (Fig. 10)"
                     + (f", {tol.header()}:" if tol else ":"))
        lines.append(_fixed(others, speed_cols, "vs policy"))
    return "\n".join(lines)


def _fixed(table: pd.DataFrame, cols, first: str) -> str:
    cols = [c for c in cols if c[0] in table.columns]
    widths = [max(len(first), *(len(str(i)) for i in table.index))] + [max(len(h), 9) for _, h, _ in cols]
    out = [" ".join(h.rjust(w) if k else h.ljust(w)
                    for k, (h, w) in enumerate(zip([first] + [h for _, h, _ in cols], widths)))]
    for policy, row in table.iterrows():
        cells = [str(policy).ljust(widths[0])]
        for (c, _, fmt), w in zip(cols, widths[1:]):
            v = row[c]
            text = "-" if pd.isna(v) else (f"{100 * v:.1f}%" if fmt == "%" else f"{v:.{fmt}f}")
            cells.append(text.rjust(w))
        out.append(" ".join(cells))
    return "\n".join(out)


def write_comparison(dirs: dict[str, Path], out: str | Path, tol: metrics.Tolerance | None = None,
                     log=print) -> pd.DataFrame:
    """Tabulate the run directories ``dirs`` and write ``comparison.csv`` and
    ``job_speedup_by_size.csv`` to ``out``; prints the table through ``log``, returns it."""
    out = Path(out)
    table, by_size = comparison(dirs, tol=tol)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "comparison.csv", float_format="%.6g")
    if len(by_size):
        by_size.to_csv(out / "job_speedup_by_size.csv", index=False, float_format="%.6g")
    log(format_table(table))
    return table


def replay_noise(reps: list[tuple[Path, dict[str, Path]]], tol: metrics.Tolerance,
                 baseline: str = BASELINE) -> pd.DataFrame:
    """The baseline against itself: per pair of replicas that replayed the same seed
    (consecutive repeats), the shares of tasks "shortened / equal / lengthened" beyond
    ``tol`` — what replay noise alone produces.  A launch that moves by milliseconds can
    change the order of later allocations, so this is not bounded by the launch latency;
    a policy's shares are a finding only where they stand out of these.  Empty when no
    seed was replayed twice."""
    by_seed: dict = {}
    for _, dirs in reps:
        if baseline in dirs:
            by_seed.setdefault(metrics.as_run(dirs[baseline]).summary.get("seed"), []).append(dirs[baseline])
    rows = []
    for seed, runs in by_seed.items():
        for a, b in zip(runs, runs[1:]):
            f = metrics.task_speedup_fractions(metrics.task_speedups(a, b, tol.seconds), tol.seconds)
            rows.append({"seed": seed, "first": str(a), "second": str(b), **f})
    return pd.DataFrame(rows, columns=["seed", "first", "second", "tasks", "shortened", "equal", "lengthened"])


def write_study(modes: dict[str, list[tuple[Path, dict[str, Path]]]], out: str | Path, *,
                tolerance: float | None = None, heartbeat: float | None = None, log=print) -> dict:
    """Compare every replica of every mode and write what they say together.

    ``modes``: mode ('sim' or 'ray') -> replicas, each (its directory, policy -> run
    directory); a replica is one seed, or one repeated replay of a seed.  One tolerance
    (``--tolerance``, else the largest ``metrics.launch_noise`` of all the runs) serves
    every table, so the simulator's and Ray's shares count the same differences as equal.
    Writes each replica's ``comparison.csv``; with several replicas of a mode
    ``comparison_stats.csv`` (mean, 95% CI, range) in the mode's directory; with both
    modes ``sim_vs_ray.csv`` in ``out``; with a seed replayed more than once
    ``replay_noise.csv`` (``replay_noise``: the baseline against itself).
    Returns {'tolerance', 'tables', 'stats', 'noise', 'sim_vs_ray'}.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tol = metrics.noise_tolerance([d for reps in modes.values() for _, dirs in reps for d in dirs.values()],
                                  heartbeat=heartbeat, override=tolerance)
    result = {"tolerance": tol, "tables": {}, "stats": {}, "sim_vs_ray": None}
    for mode, reps in modes.items():
        quiet = len(reps) > 1
        if len(modes) > 1 and not quiet:
            log(f"{mode}:")
        for line in incomplete(d for _, dirs in reps for d in dirs.values()):
            log(line)
        tables = result["tables"][mode] = [
            write_comparison(dirs, where, tol, log=(lambda *a: None) if quiet else log) for where, dirs in reps]
        stats = result["stats"][mode] = replica_stats(tables)
        noise = result.setdefault("noise", {})[mode] = replay_noise(reps, tol)
        if len(noise):
            home = _common_parent([where for where, _ in reps])
            noise.to_csv(home / "replay_noise.csv", index=False, float_format="%.6g")
            cells = {k: interval(noise[k]) for k in ("shortened", "equal", "lengthened")}
            log(f"{mode} noise, {BASELINE} against itself over {len(noise)} pair(s) of repeats ({tol.header()}): "
                + ", ".join(f"'{k}' {100 * v['mean']:.1f}% [{100 * v['min']:.1f}, {100 * v['max']:.1f}]"
                            for k, v in cells.items())
                + " — shares between policies within these are noise")
        if len(reps) > 1:
            home = _common_parent([where for where, _ in reps])
            stats.to_csv(home / "comparison_stats.csv", index=False, float_format="%.6g")
            if len(modes) == 1:
                log(format_stats(stats, f"{mode}: mean ±95% CI (Student t) [min, max] over {len(reps)} "
                                        f"replicas, {tol.header()}"))
    if {"sim", "ray"} <= set(modes):
        both = result["sim_vs_ray"] = sim_vs_ray(result["stats"]["sim"], result["stats"]["ray"])
        both.to_csv(out / "sim_vs_ray.csv", index=False, float_format="%.6g")
        log(f"simulator and Ray side by side, {tol.header()} in both:")
        log(format_sim_vs_ray(both))
    return result


def incomplete(dirs) -> list[str]:
    """A warning line for each run that did not finish every job: a comparison covers
    only the jobs (and tasks) both runs finished (ran), so such a run's shares and
    speedups describe a subset of the trace."""
    lines = []
    for d in dirs:
        jobs = metrics.as_run(d).summary.get("jobs") or {}
        total, done = sum(jobs.values()), jobs.get("finished", 0)
        if total and done < total:
            other = ", ".join(f"{k} {v}" for k, v in jobs.items() if k != "finished")
            lines.append(f"warning: {d} finished {done} of {total} jobs ({other}); its comparisons "
                         "cover only what both runs completed")
    return lines


def _common_parent(paths: list[Path]) -> Path:
    parents = {Path(p).parent for p in paths}
    return parents.pop() if len(parents) == 1 else Path(paths[0]).parent
