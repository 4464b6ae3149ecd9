"""``rayrm sweep``: every cell x seed x policy of a spec simulated on Ray, resumably.

What ``DIR`` (``--out``) holds:

* ``manifest.jsonl`` — one line per finished simulation, appended as it finishes: its
  key (``rayrm.rm.runtime.sweep_spec.run_key``: the cell's identity, seed, policy and
  rayrm's version), cell, seed, policy, ``ok`` or ``failed`` with the error, wall
  seconds and where it ran.  A line cut short by a killed driver is ignored.
* ``runs/<key>/`` — the simulation's results: summary.json, jobs.csv and the tasks
  table (what a comparison reads), or with ``--keep-runs`` the whole run directory.
  Written through a temporary directory renamed into place, before its manifest line.
* ``cells/<id>/cell.yaml`` — a generated cell's config and job table.
* ``sweep.csv`` — per cell and compared policy: for every metric of
  ``rayrm.rm.runs.compare.conclusion_columns`` against the baseline, its mean, 95% CI
  half-width (Student t), min and max over the seeds whose runs all finished
  (``replica_stats``: the numbers of ``rayrm compare --seeds``, tolerance as there);
  and ``tasks_<baseline>_net``: per seed, the share of tasks the baseline shortens minus
  the share it lengthens, the same statistics over the seeds (a CI clear of 0: the
  baseline shortens more tasks than it lengthens beyond the seeds' noise).
  Rewritten as simulations finish, so it can be read before the end.
* ``report/`` — heatmaps and ``index.html`` (``rayrm.rm.runs.sweep_report``).

Running the same command again skips every simulation whose key the manifest records
as ``ok`` (its results present) and reruns failed ones, so an interrupted sweep
loses at most what was running; a changed grid reuses every cell it still contains.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from rayrm.rm.runs import metrics
from rayrm.rm.runs.compare import comparison, conclusion_columns, interval, replica_stats
from rayrm.rm.runtime.experiments import Outcome, Progress, Runner, simulate_files, write_files
from rayrm.rm.runtime.sweep_spec import Cell, SweepSpec, cell_config, cell_identity, run_key, version

MANIFEST = "manifest.jsonl"
STATS = ("mean", "ci95", "min", "max")


class Record(TypedDict):
    """One line of manifest.jsonl."""

    key: str
    cell: dict
    seed: int
    policy: str
    version: str
    status: str          # 'ok' or 'failed'
    error: str | None
    seconds: float
    node: str
    peak_rss_mb: float
    finished: str        # UTC, ISO 8601


@dataclass(frozen=True)
class Planned:
    """One simulation of the sweep."""

    key: str
    cell: Cell
    seed: int
    policy: str


@dataclass
class SweepResult:
    """What a sweep did: simulations planned, skipped as finished, run now, failed."""

    total: int
    skipped: int
    ran: int = 0
    failed: list[dict] = field(default_factory=list)
    interrupted: bool = False


def read_manifest(out: Path) -> dict[str, Record]:
    """key -> its last manifest record (lines that do not parse are ignored)."""
    records = {}
    path = out / MANIFEST
    if not path.exists():
        return records
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and "key" in rec:
            records[rec["key"]] = rec
    return records


def finished(out: Path, records: dict[str, dict]) -> set[str]:
    """Keys recorded ``ok`` whose results are present."""
    return {k for k, r in records.items() if r.get("status") == "ok" and (out / "runs" / k).is_dir()}


def plan(spec: SweepSpec) -> tuple[list[Planned], dict[Cell, dict]]:
    """Every simulation, cell by cell, seed by seed, policy by policy; and each cell's identity."""
    identities = {cell: cell_identity(spec, cell) for cell in spec.cells()}
    ver = version()
    runs = [Planned(run_key(identities[cell], seed, p, ver), cell, seed, p)
            for cell in spec.cells() for seed in spec.seeds for p in spec.policies]
    return runs, identities


def _cell_home(out: Path, identity: dict) -> Path:
    return out / "cells" / run_key(identity, 0, "", "")[:12]


def _fail(message: str):
    raise RuntimeError(message)


def _calls(spec: SweepSpec, todo: list[Planned], identities, runner: Runner, out: Path, keep: str):
    """(key, fn, args) per simulation to run, each cell's config built (and shared in
    Ray's object store) when its first simulation is handed to a worker; a cell whose
    config cannot be built gives calls that fail with that error."""
    shared: dict[Cell, tuple] = {}
    for run in todo:
        if run.cell not in shared:
            try:
                cfg = cell_config(spec, run.cell, _cell_home(out, identities[run.cell]))
                shared = {run.cell: (runner.share(cfg), None)}
            except Exception as e:  # noqa: BLE001 (recorded as the cell's failure)
                shared = {run.cell: (None, f"{type(e).__name__}: {e}")}
        ref, error = shared[run.cell]
        if error is not None:
            yield run.key, _fail, (f"cell config: {error}",)
        else:
            yield run.key, simulate_files, (ref, run.policy, run.seed, keep)


def _record(out: Path, run: Planned, outcome: Outcome) -> Record:
    """Store one outcome: its files under runs/<key>, then its manifest line."""
    rec: Record = {"key": run.key, "cell": run.cell.as_dict(), "seed": run.seed, "policy": run.policy,
           "version": version(), "status": "ok" if outcome.ok else "failed", "error": outcome.error,
           "seconds": round(outcome.seconds, 3), "node": outcome.node, "peak_rss_mb": round(outcome.peak_rss_mb, 1),
           "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if outcome.ok:
        write_files(outcome.value.files, out / "runs" / run.key)
    with open(out / MANIFEST, "a") as fh:
        fh.write(json.dumps(rec) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return rec


def run_sweep(spec: SweepSpec, out: str | Path, runner: Runner, *, keep_runs: bool = False,
              every: float = 5.0, log=print, stream=None) -> SweepResult:
    """Run what the manifest does not record as finished, recording each as it finishes,
    rewriting sweep.csv every ``every`` seconds and at the end, then the report."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "spec.yaml").write_text(spec.path.read_text())
    for staging in (out / "runs").glob(".*-*") if (out / "runs").is_dir() else ():
        shutil.rmtree(staging, ignore_errors=True)       # half-written by a killed driver
    runs, identities = plan(spec)
    records = read_manifest(out)
    done = finished(out, records)
    todo = [r for r in runs if r.key not in done]
    retried = sum(1 for r in todo if records.get(r.key, {}).get("status") == "failed")
    result = SweepResult(len(runs), len(runs) - len(todo))
    cells, seeds, pols = len(spec.cells()), len(spec.seeds), len(spec.policies)
    log(f"sweep {spec.path.name}: {cells} cell(s) x {seeds} seed(s) x {pols} policies = {len(runs)} "
        f"simulations; {result.skipped} already finished in {out} (skipped), {len(todo)} to run"
        + (f" ({retried} failed before, retried)" if retried else ""))
    table = Tabulator(spec, out, identities)
    if not todo:
        log(f"nothing to run: every simulation of this spec is finished ({out / MANIFEST})")
        if not (out / "sweep.csv").exists() or not (out / "report" / "index.html").exists():
            table.write(records, report=True)
        return result
    by_key = {r.key: r for r in todo}
    try:
        with runner:
            progress = Progress(len(todo), "sweep", every=every, stream=stream)
            calls = _calls(spec, todo, identities, runner, out, "all" if keep_runs else "compact")
            for outcome in runner.map(calls, tick=progress.tick):
                rec = records[outcome.key] = _record(out, by_key[outcome.key], outcome)
                result.ran += 1
                if not outcome.ok:
                    result.failed.append(rec)
                    log(f"failed: {rec['cell']} seed {rec['seed']} {rec['policy']}: {rec['error']}")
                if progress.step(outcome.ok):
                    table.write(records)
    except KeyboardInterrupt:
        result.interrupted = True
        table.write(records)
        log(f"interrupted after {result.ran} of {len(todo)}; rerun the same command to resume")
        raise
    table.write(records, report=True)
    log(f"wrote {out / 'sweep.csv'} and {out / 'report' / 'index.html'}"
        + (f"; {len(result.failed)} simulation(s) failed (see {out / MANIFEST})" if result.failed else ""))
    return result


class Tabulator:
    """sweep.csv from the manifest; each seed's comparison is computed once and kept."""

    def __init__(self, spec: SweepSpec, out: Path, identities: dict[Cell, dict]):
        self.spec, self.out, self.identities = spec, out, identities
        self.version = version()
        self.cache: dict[tuple, object] = {}

    def rows(self, records: dict[str, dict]) -> list[dict]:
        """One row per cell and compared policy (see the module docstring)."""
        spec, base = self.spec, self.spec.baseline
        others = [p for p in spec.policies if p != base]
        rows = []
        for cell in spec.cells():
            tables, failed = [], 0
            for seed in spec.seeds:
                keys = {p: run_key(self.identities[cell], seed, p, self.version) for p in spec.policies}
                status = [records.get(k, {}).get("status") for k in keys.values()]
                failed += status.count("failed")
                if all(s == "ok" for s in status):
                    tables.append(self._table(keys))
            stats = replica_stats(tables, base) if tables else None
            for p in others:
                row = {**cell.as_dict(), "policy": p, "baseline": base, "seeds": len(tables),
                       "failed_runs": failed}
                for col, _, _ in conclusion_columns(base):
                    hit = stats[(stats["policy"] == p) & (stats["metric"] == col)] if stats is not None else []
                    for s in STATS:
                        row[f"{col}_{s}"] = float(hit[s].iloc[0]) if len(hit) else math.nan
                net = interval([t.loc[p, f"tasks_{base}_shortened"] - t.loc[p, f"tasks_{base}_lengthened"]
                                for t in tables if p in t.index and f"tasks_{base}_shortened" in t.columns])
                row.update({f"tasks_{base}_net_{s}": net[s] for s in STATS})
                rows.append(row)
        return rows

    def _table(self, keys: dict[str, str]):
        ident = tuple(keys.values())
        if ident not in self.cache:
            dirs = {p: self.out / "runs" / k for p, k in keys.items()}
            tol = metrics.noise_tolerance(list(dirs.values()))
            self.cache[ident] = comparison(dirs, baseline=self.spec.baseline, tol=tol)[0]
        return self.cache[ident]

    def write(self, records: dict[str, dict], report: bool = False) -> None:
        """Rewrite sweep.csv (through a temporary file); with ``report`` also report/."""
        import pandas as pd  # noqa: PLC0415 (pandas only once there is a table)

        table = pd.DataFrame(self.rows(records))
        tmp = self.out / "sweep.csv.tmp"
        table.to_csv(tmp, index=False, float_format="%.6g")
        tmp.replace(self.out / "sweep.csv")
        if report:
            from rayrm.rm.runs.sweep_report import write_report  # noqa: PLC0415 (matplotlib)
            write_report(table, self.spec.axes, self.spec.baseline, self.out / "report",
                         title=f"sweep {self.spec.path.name}", spec_text=self.spec.path.read_text())


def exit_status(result: SweepResult) -> int:
    """0 when every simulation finished, 1 when some failed."""
    return 1 if result.failed else 0


def main_log(stream=None) -> Callable[[str], None]:
    """Log lines to stdout, flushed (progress goes to stderr)."""
    def log(line: str) -> None:
        print(line, file=stream or sys.stdout, flush=True)
    return log
