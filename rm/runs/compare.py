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

from pathlib import Path

import pandas as pd

from rayrm.rm.runs import metrics

BASELINE = "tsf"


def comparison(dirs: dict[str, Path], baseline: str = BASELINE) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(comparison table, per-size-bin speedup table) from the run directories."""
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


def write_comparison(dirs: dict[str, Path], out: str | Path, log=print) -> pd.DataFrame:
    """Tabulate the run directories ``dirs`` and write ``comparison.csv`` and
    ``job_speedup_by_size.csv`` to ``out``; prints the table through ``log``, returns it."""
    out = Path(out)
    table, by_size = comparison(dirs)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "comparison.csv", float_format="%.6g")
    if len(by_size):
        by_size.to_csv(out / "job_speedup_by_size.csv", index=False, float_format="%.6g")
    log(format_table(table))
    return table
