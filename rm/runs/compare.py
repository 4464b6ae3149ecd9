"""Several policies on one trace and seed, and the table that compares them (tsf-paper §VI-B).

``compare(config_path, policies, mode, out)`` runs each policy — in the simulator,
in up to two worker processes, or as Ray replays one after another — into
``out/<policy>/`` and writes, from those run directories alone (``rayrm.rm.runs.metrics``):

* ``comparison.csv`` — per policy: makespan, job queueing delay and job completion
  time percentiles (Fig. 9), task queueing delay percentiles (Fig. 11a), and against
  TSF the fractions of tasks whose queueing delay TSF shortens / leaves equal /
  lengthens (Fig. 11b; per-task speedup = D_P − D_TSF) and the mean relative per-job
  speedup (C_P − C_TSF)/C_P per job-size bin (Fig. 10);
* ``job_speedup_by_size.csv`` — the Fig. 10 table in full: per alternative and bin,
  jobs, mean and std of the relative and absolute speedup.
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import pandas as pd

from rayrm.rm.core.errors import InputError

MAX_WORKERS = 2
BASELINE = "tsf"


def _simulate_one(config_path: str, policy: str, seed: int | None, out: str) -> dict:
    """Worker: load the config and simulate one policy into ``out`` (a fresh process each)."""
    from rayrm.rm.core.config import load_config  # noqa: PLC0415
    from rayrm.rm.sim.engine import simulate  # noqa: PLC0415
    return simulate(load_config(config_path), policy=policy, seed=seed, out=out, progress=False)


def run_policies(config_path: str | Path, policies: list[str], out: Path, *, mode: str = "sim",
                 seed: int | None = None, workers: int = MAX_WORKERS, replay_options: dict | None = None,
                 log=print) -> dict[str, Path]:
    """Run every policy into ``out/<policy>``; returns policy -> run directory."""
    dirs = {p: out / p for p in policies}
    if mode == "sim":
        workers = max(1, min(workers, MAX_WORKERS, len(policies), os.cpu_count() or 1))
        if workers == 1:
            for p in policies:
                _report(log, p, _simulate_one(str(config_path), p, seed, str(dirs[p])))
            return dirs
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(_simulate_one, str(config_path), p, seed, str(dirs[p])): p
                       for p in policies}
            for fut in as_completed(futures):
                _report(log, futures[fut], fut.result())
        return dirs
    if mode == "ray":
        try:
            from rayrm.rm.runtime.driver import replay  # noqa: PLC0415
        except ImportError as e:
            raise InputError(f"--mode ray needs the Ray replay (rayrm.rm.runtime.driver), which cannot be imported: {e}") from None
        from rayrm.rm.core.config import load_config  # noqa: PLC0415
        cfg = load_config(config_path)
        for p in policies:
            opts = dict(replay_options or {})
            if seed is not None:
                opts["seed"] = seed
            _report(log, p, replay(cfg, policy=p, out=dirs[p], **opts))
        return dirs
    raise InputError(f"unknown mode '{mode}' (choose sim or ray)", field="--mode")


def _report(log, policy: str, summary: dict) -> None:
    jobs = summary.get("jobs", {})
    log(f"  {policy:<10} makespan {summary.get('makespan', 0):10.1f}s  "
        f"jobs finished {jobs.get('finished', 0)}, rejected {jobs.get('rejected', 0)}  "
        f"(wall {summary.get('wall_seconds')}s)")


def comparison(dirs: dict[str, Path], baseline: str = BASELINE) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(comparison table, per-size-bin speedup table) from the run directories."""
    from rayrm.rm.runs import metrics  # noqa: PLC0415
    runs = {p: metrics.as_run(d) for p, d in dirs.items()}
    table = metrics.comparison_table(runs, baseline=baseline)
    bins = []
    if baseline in runs:
        for p, r in runs.items():
            if p == baseline:
                continue
            b = metrics.speedup_by_size(metrics.job_speedups(runs[baseline], r)).reset_index()
            b.insert(0, "policy", p)
            bins.append(b)
    by_size = pd.concat(bins, ignore_index=True) if bins else pd.DataFrame()
    return table, by_size


def format_table(table: pd.DataFrame, baseline: str = BASELINE) -> str:
    """The comparison as two fixed-width text tables (performance; TSF against each)."""
    perf_cols = [("makespan", "makespan", 0), ("job_delay_p50", "job delay p50", 1),
                 ("job_delay_p90", "p90", 1), ("job_completion_p50", "job compl p50", 1),
                 ("job_completion_p90", "p90", 1), ("task_delay_mean", "task delay mean", 1),
                 ("task_delay_p50", "p50", 1), ("task_delay_p90", "p90", 1)]
    lines = [_fixed(table, perf_cols, "policy")]
    speed_cols = [(f"tasks_{baseline}_shortened", f"{baseline} shortens", "%"),
                  (f"tasks_{baseline}_equal", "equal", "%"),
                  (f"tasks_{baseline}_lengthened", "lengthens", "%")] + [
        (f"job_speedup_{b}", f"job speedup {b}", "%") for b in ("<=10", "11-100", "101-500", ">500")]
    others = table[table.index != baseline]
    if len(others) and speed_cols[0][0] in others.columns:
        lines.append("")
        lines.append(f"per-task speedup of {baseline} (reduction of task queueing delay, Fig. 11b) "
                     f"and mean per-job speedup (C_P - C_{baseline}) / C_P by job size (Fig. 10):")
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


def compare(config_path: str | Path, policies: list[str], out: str | Path, *, mode: str = "sim",
            seed: int | None = None, replay_options: dict | None = None, log=print) -> pd.DataFrame:
    """Run, tabulate and write ``comparison.csv`` and ``job_speedup_by_size.csv``; returns the table."""
    out = Path(out)
    started = time.perf_counter()
    dirs = run_policies(config_path, policies, out, mode=mode, seed=seed,
                        replay_options=replay_options, log=log)
    table, by_size = comparison(dirs)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "comparison.csv", float_format="%.6g")
    if len(by_size):
        by_size.to_csv(out / "job_speedup_by_size.csv", index=False, float_format="%.6g")
    log(format_table(table))
    log(f"wrote {out}/comparison.csv and {len(dirs)} run directories "
        f"({time.perf_counter() - started:.1f}s)")
    sys.stdout.flush()
    return table
