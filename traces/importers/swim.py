"""SWIM Facebook workloads (e.g. ``FB-2009_samples_24_times_1hr_0.tsv``) as a rayrm config.

The format (tab-separated, no header), one MapReduce job per line::

    job id   submit s   gap to previous job s   map input B   shuffle B   reduce output B

SWIM's files with input paths add a 7th column (the job's HDFS input path) and two
empty ones (9 in all); those cells, and any other cells after the 6th, are not used
(a note counts the rows that have them).

The trace has only sizes, so tasks and durations are modelled.  ``MB`` is 2^20
bytes; every number below is an option (``rayrm trace import swim --help``).

* **Tasks.**  maps ``m = max(1, ceil(input / 64 MB))`` (one per HDFS block, as SWIM's
  own replay script), reduces ``r = ceil(shuffle / 64 MB)`` (SWIM's "data per reduce
  task"); a job with no shuffle bytes is map-only (``r = 0``).
* **Durations** (one fixed duration per stage, from the stage's bytes per task)::

      map    = 2 s + (input / m) / 8 MB/s   [+ (output / m) / 16 MB/s when map-only]
      reduce = 2 s + (shuffle / r) / 8 MB/s + (output / r) / 16 MB/s

  i.e. a start-up overhead, a read-and-process rate for the split, a shuffle
  (fetch, merge) rate and an HDFS write rate.  A full 64 MB map runs 2 + 64/8 = 10 s.
* **Two jobs per line.**  rayrm gives every task of an app one demand vector, and
  map and reduce containers differ (defaults ``cpu:1;memory_mb:1024`` and
  ``cpu:1;memory_mb:2048``), so each line becomes ``<id>-map`` submitted at the
  line's submit time and, when ``r > 0``, ``<id>-reduce`` submitted one map
  duration later (the earliest the map stage can end if all maps run at once).
  rayrm has no stage dependency: under contention reduces may start before the
  last map ends.
* **Cluster.**  ``--cluster FILE`` takes ``cluster.nodes`` (and ``cluster.events``)
  from a rayrm config YAML; otherwise 600 nodes (the size of the 2009 Facebook
  cluster SWIM samples come from) of ``cpu:8;memory_mb:16384``.
* **Skipped rows**: an empty id, a missing cell among the first 6, a cell that is
  not a non-negative number, a job id seen before.  The gap column is only checked.
* **Refused** (one line naming the file, row and column): a job of more than
  10,000,000 maps or reduces (640 TB at 64 MB a task; the largest job of the FB-2010
  sample has 174,613 maps and 443,932 reduces), and ``--nodes`` above 1,000,000.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import yaml

from rayrm.rm.core.config import MAX_GROUP, MAX_JOB_TASKS, node_group
from rayrm.rm.core.jobs import Durations, JobSpec
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import AppSpec, NodeSpec
from rayrm.traces.importers.common import ImportResult, SkipReport, at_most, parse_resources
from rayrm.traces.importers.reading import numeric, read_table

MB = 2 ** 20
COLUMNS = ["job id", "submit", "gap", "input bytes", "shuffle bytes", "output bytes"]
HELP = "SWIM Facebook workload TSV (job, submit s, gap s, input B, shuffle B, output B)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="TSV", help="SWIM workload file(s), read in order")
    g = parser.add_argument_group("cluster")
    g.add_argument("--cluster", metavar="YAML", help="take cluster.nodes (and events) from this rayrm config")
    g.add_argument("--nodes", type=int, default=600, help="default cluster size (default 600)")
    g.add_argument("--node-capacity", default="cpu:8;memory_mb:16384", help="default node capacity")
    m = parser.add_argument_group("task model")
    m.add_argument("--split-mb", type=float, default=64.0, help="input bytes per map task (default 64)")
    m.add_argument("--reduce-mb", type=float, default=64.0, help="shuffle bytes per reduce task (default 64)")
    m.add_argument("--map-demand", default="cpu:1;memory_mb:1024")
    m.add_argument("--reduce-demand", default="cpu:1;memory_mb:2048")
    m.add_argument("--overhead", type=float, default=2.0, help="task start-up seconds (default 2)")
    m.add_argument("--map-rate", type=float, default=8.0, help="map read+process MB/s (default 8)")
    m.add_argument("--shuffle-rate", type=float, default=8.0, help="reduce shuffle MB/s (default 8)")
    m.add_argument("--write-rate", type=float, default=16.0, help="HDFS output write MB/s (default 16)")


def load(args: argparse.Namespace, report: SkipReport) -> ImportResult:
    return import_swim(args.inputs, report, cluster=args.cluster, nodes=args.nodes,
                       node_capacity=args.node_capacity, split_mb=args.split_mb,
                       reduce_mb=args.reduce_mb, map_demand=args.map_demand,
                       reduce_demand=args.reduce_demand, overhead=args.overhead,
                       map_rate=args.map_rate, shuffle_rate=args.shuffle_rate,
                       write_rate=args.write_rate)


def cluster_from_file(path: str | Path) -> tuple[list[NodeSpec], list[dict]]:
    """``cluster.nodes`` (expanded) and ``cluster.events`` (as written) of a rayrm config."""
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except OSError as e:
        raise InputError(f"cannot read cluster file: {e.strerror}", file=str(path)) from None
    except yaml.YAMLError:
        raise InputError("malformed YAML", file=str(path)) from None
    cluster = (doc or {}).get("cluster") if isinstance(doc, dict) else None
    groups = cluster.get("nodes") if isinstance(cluster, dict) else None
    if not isinstance(groups, list) or not groups:
        raise InputError("needs a list of node groups", file=str(path), field="cluster.nodes")
    nodes = []
    for k, g in enumerate(groups):
        try:
            nodes.extend(node_group(g, f"cluster.nodes[{k}]"))
        except InputError as e:
            raise e.at(file=str(path)) from None
    return nodes, list(cluster.get("events") or [])


def task_model(inp, shuffle, out, *, split_mb=64.0, reduce_mb=64.0, overhead=2.0, map_rate=8.0,
               shuffle_rate=8.0, write_rate=16.0):
    """Vectorised task counts and durations: (maps, reduces, map_seconds, reduce_seconds)."""
    inp, shuffle, out = (np.asarray(x, dtype=float) for x in (inp, shuffle, out))
    maps = np.maximum(1, np.ceil(inp / (split_mb * MB))).astype(np.int64)
    reduces = np.ceil(shuffle / (reduce_mb * MB)).astype(np.int64)
    map_only = reduces == 0
    t_map = overhead + inp / maps / (map_rate * MB)
    t_map = t_map + np.where(map_only, out / maps / (write_rate * MB), 0.0)
    r = np.maximum(reduces, 1)
    t_reduce = overhead + shuffle / r / (shuffle_rate * MB) + out / r / (write_rate * MB)
    return maps, reduces, t_map, np.where(map_only, 0.0, t_reduce)


def import_swim(inputs, report: SkipReport, *, cluster=None, nodes=600, node_capacity="cpu:8;memory_mb:16384",
                split_mb=64.0, reduce_mb=64.0, map_demand="cpu:1;memory_mb:1024",
                reduce_demand="cpu:1;memory_mb:2048", overhead=2.0, map_rate=8.0,
                shuffle_rate=8.0, write_rate=16.0) -> ImportResult:
    for name, v in (("--split-mb", split_mb), ("--reduce-mb", reduce_mb), ("--map-rate", map_rate),
                    ("--shuffle-rate", shuffle_rate), ("--write-rate", write_rate)):
        if not v > 0:
            raise InputError(f"must be positive, got {v}", field=name)
    if overhead < 0:
        raise InputError(f"must not be negative, got {overhead}", field="--overhead")
    d_map = parse_resources(map_demand, "--map-demand")
    d_reduce = parse_resources(reduce_demand, "--reduce-demand")
    if cluster:
        node_list, events = cluster_from_file(cluster)
    else:
        if nodes < 1:
            raise InputError(f"must be at least 1, got {nodes}", field="--nodes")
        at_most(nodes, MAX_GROUP, "nodes", field="--nodes")
        cap = parse_resources(node_capacity, "--node-capacity")
        node_list = [NodeSpec(f"n{i:03d}", cap, {}) for i in range(1, nodes + 1)]
        events = []

    jobs: list[JobSpec] = []
    seen: set[str] = set()
    for path in ([inputs] if isinstance(inputs, (str, Path)) else inputs):
        df = read_table(path, COLUMNS, sep="\t")
        lines = df["_line"].to_numpy()
        ids = df["job id"].astype(str).str.strip().to_numpy()
        report.note("rows with cells after the 6th (e.g. SWIM's input path): those cells are not used",
                    int(df["_wide"].sum()))
        checks = [(ids == "", "job id", "empty job id")]
        cols = {}
        for c in COLUMNS[1:]:
            values, empty, bad = numeric(df, c)
            checks += [(empty, c, "missing"), (bad, c, "not a number"),
                       (~bad & ~empty & (values < 0), c, "negative")]
            cols[c] = values
        dup = np.zeros(len(ids), dtype=bool)
        for k, i in enumerate(ids):
            if i in seen and i:
                dup[k] = True
            seen.add(i)
        checks.append((dup, "job id", "job id used before"))
        good = report.check_rows(lines, checks, file=path)
        for col, per in (("input bytes", split_mb), ("shuffle bytes", reduce_mb)):
            tasks = np.ceil(cols[col] / (per * MB))
            for k in np.flatnonzero(good & (tasks > MAX_JOB_TASKS))[:1]:
                at_most(tasks[k], MAX_JOB_TASKS, f"tasks per job ({per:g} MB each)", file=path,
                        row=int(lines[k]), field=col)
        gap_off = good & (np.abs(np.diff(cols["submit"], prepend=0.0) - cols["gap"]) > 1)
        report.note("gap column disagrees with the submit times (submit times used)", int(gap_off.sum()))
        maps, reduces, t_map, t_reduce = task_model(
            cols["input bytes"][good], cols["shuffle bytes"][good], cols["output bytes"][good],
            split_mb=split_mb, reduce_mb=reduce_mb, overhead=overhead, map_rate=map_rate,
            shuffle_rate=shuffle_rate, write_rate=write_rate)
        report.note("jobs without shuffle bytes imported as map-only", int((reduces == 0).sum()))
        for jid, submit, m, r, tm, tr in zip(ids[good], cols["submit"][good], maps, reduces, t_map, t_reduce):
            jobs.append(JobSpec(AppSpec(f"{jid}-map", d_map, int(m), 1.0, float(submit)),
                                Durations("fixed", mean=round(float(tm), 3))))
            if r > 0:
                jobs.append(JobSpec(AppSpec(f"{jid}-reduce", d_reduce, int(r), 1.0,
                                            round(float(submit + tm), 3)),
                                    Durations("fixed", mean=round(float(tr), 3))))
    names = ", ".join(Path(p).name for p in ([inputs] if isinstance(inputs, (str, Path)) else inputs))
    return ImportResult(node_list, jobs, events, description=f"SWIM workload {names} (rayrm trace import swim)")
