"""Google ClusterData 2011 (trace format v2) tables as a rayrm config.

INPUTs are files or directories; a file belongs to the table named in its path
(``machine_events/part-00000-of-00001.csv.gz`` or ``machine_events.csv``).  Tables
are CSV without a header, times in µs; ``machine_events`` and ``task_events`` are
required, ``machine_attributes`` and ``task_constraints`` optional.

* machine_events: time, machine ID, event type (0 ADD, 1 REMOVE, 2 UPDATE),
  platform ID, CPUs, memory
* machine_attributes: time, machine ID, attribute name, value, deleted
* task_events: time, missing info, job ID, task index, machine ID, event type
  (0 SUBMIT, 1 SCHEDULE, 2 EVICT, 3 FAIL, 4 FINISH, 5 KILL, 6 LOST, 7/8 UPDATE),
  user, scheduling class, priority, CPU request, memory request, disk request,
  different-machine flag
* task_constraints: time, job ID, task index, operator (0 EQUAL, 1 NOT_EQUAL,
  2 LESS_THAN, 3 GREATER_THAN), attribute name, value

Mapping and assumptions (times become seconds: µs / 10^6, not shifted):

* **Nodes.**  Machine ``M`` is node ``mM`` with capacity ``cpu`` and ``memory`` in the
  trace's normalised units (1.0 = the largest machine), from its first event
  that gives both; a machine that never does is left out.  Machines present at
  the earliest ADD are the initial cluster; later ADDs are ``join`` events and
  REMOVEs ``leave`` events (a machine may leave and come back).  UPDATE events
  (capacity changes) are not modelled: the first capacity is kept (a note counts
  them).  Events at 2^63 − 1 (after the trace window) are left out.
* **Attributes.**  Each machine attribute's first value that is not deleted;
  later changes are ignored (a note counts them).  The platform ID becomes the
  attribute ``platform``.  Names and values are hashes or integers; they become
  constraint-grammar tokens (``common.token``: ``=`` padding becomes ``_``), an
  empty value becomes ``_``, and a name ``node`` becomes ``attr_node``.
* **Constraints.**  EQUAL/NOT_EQUAL -> ``==``/``!=``, LESS_THAN/GREATER_THAN ->
  ``<``/``>`` (these need a number); against an empty value EQUAL means the
  attribute is absent (``not exists``) and NOT_EQUAL that it is present
  (``exists``).  A task's constraints are ANDed.  The different-machine flag
  (anti-affinity) and disk requests are not modelled (a note counts them).
* **Jobs.**  The tasks of a trace job that share CPU request, memory request and
  constraints form one rayrm job (``<job>``, or ``<job>-1``, ``<job>-2``, ... when
  they differ), submitted at the earliest first SUBMIT of its tasks.  A task's
  requests are its last ones given up to its last SCHEDULE.  Its duration runs
  from its last SCHEDULE to the FINISH after it.
* **Left out by rule** (reported): tasks never scheduled, tasks whose last
  attempt ended in EVICT/FAIL/KILL/LOST, tasks still running at the trace end —
  ``--unfinished truncate`` keeps the last two kinds, ending them at that event
  or at the last time in task_events — and tasks requesting neither CPU nor memory.
* **Bad rows** (``--strict`` stops): a cell that is not a number where one is
  needed, an unknown event type or operator, LESS/GREATER_THAN on a non-number.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import NodeSpec, Resources
from rayrm.traces.importers.common import (ImportResult, SkipReport, attr_value, numeric, read_table, token,
                                     width_check)

HELP = "Google ClusterData 2011 tables: machine_events, machine_attributes, task_events, task_constraints"
TABLES = {
    "machine_events": ["time", "machine_id", "event_type", "platform_id", "cpus", "memory"],
    "machine_attributes": ["time", "machine_id", "name", "value", "deleted"],
    "task_events": ["time", "missing_info", "job_id", "task_index", "machine_id", "event_type", "user",
                    "scheduling_class", "priority", "cpu_request", "memory_request", "disk_request",
                    "different_machine"],
    "task_constraints": ["time", "job_id", "task_index", "operator", "name", "value"],
}
AFTER_TRACE = 2 ** 63 - 1
ADD, REMOVE, UPDATE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="PATH",
                        help="table files or directories (machine_events, task_events, ...)")
    parser.add_argument("--unfinished", choices=("skip", "truncate"), default="skip",
                        help="tasks that did not FINISH: leave out (default) or end them at their "
                             "last event / the trace end")


def load(args: argparse.Namespace, report: SkipReport) -> ImportResult:
    return import_google2011(args.inputs, report, unfinished=args.unfinished)


def find_tables(inputs) -> dict[str, list[Path]]:
    """Table name -> its files (sorted), from files and directories."""
    found: dict[str, list[Path]] = {t: [] for t in TABLES}
    for p in map(Path, inputs):
        if not p.exists():
            raise InputError("no such file or directory", file=str(p))
        files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
        for f in files:
            if not (f.name.endswith(".csv") or f.name.endswith(".csv.gz")):
                continue
            table = next((t for t in TABLES if t in f.name.lower()), None) or \
                next((t for t in TABLES if t in f.parent.name.lower()), None)
            if table is None:
                raise InputError("cannot tell which table this is (neither its name nor its "
                                 "directory names one of " + ", ".join(TABLES) + ")", file=str(f))
            found[table].append(f)
    for t in ("machine_events", "task_events"):
        if not found[t]:
            raise InputError(f"no {t} table among the inputs", file=str(inputs[0]))
    return {t: sorted(set(fs)) for t, fs in found.items()}


def read(files: list[Path], table: str):
    """One table from its part files: strings plus ``_file`` (index into files) and ``_line``."""
    import pandas as pd  # noqa: PLC0415
    frames = []
    for k, f in enumerate(files):
        df = read_table(f, TABLES[table])
        df["_file"] = k
        frames.append(df)
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=str) for c in TABLES[table] + ["_file", "_line", "_wide"]})
    return pd.concat(frames, ignore_index=True)


def checked(df, files, report: SkipReport, build_checks):
    """Run ``build_checks(part) -> checks`` file by file; returns the good-row mask."""
    good = np.zeros(len(df), dtype=bool)
    fidx = df["_file"].to_numpy()
    for k, f in enumerate(files):
        sel = np.flatnonzero(fidx == k)
        part = df.iloc[sel]
        good[sel] = report.check_rows(part["_line"].to_numpy(), [width_check(part)] + build_checks(part),
                                      file=f)
    return good


def number_checks(part, columns, *, optional=()):
    checks = []
    for c in columns:
        values, empty, bad = numeric(part, c)
        if c not in optional:
            checks.append((empty, c, "missing"))
        checks.append((bad, c, "not a number"))
    return checks


def code_check(part, column, codes):
    values, empty, bad = numeric(part, column)
    return (~empty & ~bad & ~np.isin(values, codes), column, f"unknown code (expected {codes})")


def seconds(us) -> float:
    return round(float(us) / 1e6, 6)


def attr_name(name: str) -> str:
    t = token(name)
    return "attr_node" if t == "node" else t


def machines(tables, report: SkipReport):
    """(initial nodes, cluster events) from machine_events and machine_attributes."""
    files = tables["machine_events"]
    df = read(files, "machine_events")
    good = checked(df, files, report, lambda p: number_checks(p, ["time", "machine_id", "event_type"])
                   + number_checks(p, ["cpus", "memory"], optional=("cpus", "memory"))
                   + [code_check(p, "event_type", [ADD, REMOVE, UPDATE])])
    df = df[good]
    time = df["time"].astype(float).to_numpy()
    after = time >= float(AFTER_TRACE) * 0.999
    lines, fidx = df["_line"].to_numpy(), df["_file"].to_numpy()
    for k, f in enumerate(files):
        report.skip_rows("after the end of the trace window", lines[after & (fidx == k)],
                         file=f, field="time", rule=True)
    df = df[~after].assign(t=time[~after]).sort_values(["t", "_file", "_line"], kind="stable")
    attrs = machine_attributes(tables, report)
    capacity: dict[str, Resources] = {}
    order: list[tuple] = []
    for t, mid, ev, platform, cpus, memory, k, line in zip(
            df["t"], df["machine_id"], df["event_type"], df["platform_id"], df["cpus"], df["memory"],
            df["_file"], df["_line"]):
        name, ev = f"m{int(float(mid))}", int(float(ev))
        if name not in capacity and ev != REMOVE and cpus.strip() and memory.strip():
            cap = Resources(cpu=float(cpus), memory=float(memory))
            if cap:
                capacity[name] = cap
        if platform.strip():
            attrs.setdefault(name, {}).setdefault("platform", token(platform))
        order.append((t, name, ev, files[k], line))
    adds = [t for t, name, ev, _, _ in order if ev == ADD and name in capacity]
    if not adds:
        raise InputError("no machine is ever ADDed with a capacity", file=str(files[0]))
    t0 = min(adds)
    present: dict[str, bool] = {}
    nodes: list[NodeSpec] = []
    events: list[dict] = []
    for t, name, ev, f, line in order:
        if name not in capacity:
            report.skip("the machine never has CPUs and memory", file=f, row=line, field="cpus", rule=True)
            continue
        if ev == ADD and not present.get(name):
            spec = NodeSpec(name, capacity[name], dict(sorted(attrs.get(name, {}).items())))
            if t == t0 and name not in present:
                nodes.append(spec)
            else:
                join = {"name": name, "capacity": dict(spec.capacity)}
                if spec.attributes:
                    join["attributes"] = dict(spec.attributes)
                events.append({"time": seconds(t), "join": join})
            present[name] = True
        elif ev == REMOVE and present.get(name):
            present[name] = False
            events.append({"time": seconds(t), "leave": name})
        elif ev == UPDATE:
            report.note("machine UPDATE events not modelled (first capacity kept)")
    return nodes, events


def machine_attributes(tables, report: SkipReport) -> dict[str, dict]:
    files = tables["machine_attributes"]
    if not files:
        return {}
    df = read(files, "machine_attributes")
    good = checked(df, files, report, lambda p: number_checks(p, ["time", "machine_id"])
                   + number_checks(p, ["deleted"], optional=("deleted",))
                   + [((p["name"].str.strip() == "").to_numpy(), "name", "missing")])
    df = df[good]
    df = df.assign(t=df["time"].astype(float)).sort_values(["t", "_file", "_line"], kind="stable")
    out: dict[str, dict] = {}
    for mid, name, value, deleted in zip(df["machine_id"], df["name"], df["value"], df["deleted"]):
        if deleted.strip() in ("1", "1.0", "true", "True"):
            continue
        node_attrs = out.setdefault(f"m{int(float(mid))}", {})
        key, value = attr_name(name), attr_value(value)
        if key in node_attrs:
            if node_attrs[key] != value:
                report.note("machine attribute changes after the first value (ignored)")
            continue
        node_attrs[key] = value
    return out


def import_google2011(inputs, report: SkipReport, *, unfinished: str = "skip") -> ImportResult:
    from rayrm.traces.importers.google2011_tasks import task_jobs  # noqa: PLC0415

    inputs = [inputs] if isinstance(inputs, (str, Path)) else list(inputs)
    tables = find_tables(inputs)
    nodes, events = machines(tables, report)
    jobs = task_jobs(tables, report, unfinished=unfinished)
    return ImportResult(nodes, jobs, events, description="Google ClusterData 2011 (rayrm trace import google2011)")
