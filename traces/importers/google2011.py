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

from rayrm.rm.core.constraints import Clause, Constraint
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.jobs import Durations, JobSpec
from rayrm.rm.core.model import AppSpec, NodeSpec, Resources
from rayrm.traces.importers.common import ImportResult, SkipReport, attr_value, token
from rayrm.traces.importers.reading import numeric, read_table, width_check

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


# ----- tasks and their constraints into rayrm jobs ---------------------------------------

SUBMIT, SCHEDULE, EVICT, FAIL, FINISH, KILL, LOST = range(7)
END_EVENTS = (EVICT, FAIL, FINISH, KILL, LOST)
EVENT_NAMES = {EVICT: "EVICT", FAIL: "FAIL", FINISH: "FINISH", KILL: "KILL", LOST: "LOST"}
OPERATORS = {0: "==", 1: "!=", 2: "<", 3: ">"}


def task_constraints(tables, report: SkipReport) -> dict[tuple[int, int], Constraint]:
    """(job ID, task index) -> the AND of its constraints."""
    files = tables["task_constraints"]
    if not files:
        return {}
    df = read(files, "task_constraints")

    def checks(p):
        op, _, _ = numeric(p, "operator")
        value = p["value"].str.strip()
        not_number = np.isnan(numeric(p.assign(value=value), "value")[0])
        return (number_checks(p, ["time", "job_id", "task_index", "operator"])
                + [code_check(p, "operator", list(OPERATORS)),
                   ((p["name"].str.strip() == "").to_numpy(), "name", "missing"),
                   (np.isin(op, (2, 3)) & not_number, "value", "LESS_THAN/GREATER_THAN needs a number")])
    df = df[checked(df, files, report, checks)]
    clauses: dict[tuple[int, int], set] = {}
    for job, task, op, name, value in zip(df["job_id"], df["task_index"], df["operator"], df["name"], df["value"]):
        attr, op, value = attr_name(name), int(float(op)), value.strip()
        if value == "":
            clause = Clause(attr, "not exists" if op == 0 else "exists") if op in (0, 1) else None
        else:
            clause = Clause(attr, OPERATORS[op], (token(value),))
        if clause is not None:
            clauses.setdefault((int(float(job)), int(float(task))), set()).add(clause)
    return {k: Constraint(tuple(sorted(v, key=lambda c: (c.attr, c.op, c.values)))) for k, v in clauses.items()}


def task_jobs(tables, report: SkipReport, *, unfinished: str = "skip") -> list[JobSpec]:
    """rayrm jobs from task_events (+ task_constraints), per the rules in ``google2011.py``."""
    import pandas as pd  # noqa: PLC0415

    files = tables["task_events"]
    raw = read(files, "task_events")
    good = checked(raw, files, report, lambda p: number_checks(p, ["time", "job_id", "task_index", "event_type"])
                   + number_checks(p, ["cpu_request", "memory_request", "disk_request", "different_machine"],
                                   optional=("cpu_request", "memory_request", "disk_request",
                                             "different_machine"))
                   + [code_check(p, "event_type", list(range(9)))])
    raw = raw[good]
    f = pd.DataFrame({
        "job": raw["job_id"].astype(float).astype(np.int64).to_numpy(),
        "task": raw["task_index"].astype(float).astype(np.int64).to_numpy(),
        "time": raw["time"].astype(float).to_numpy(),
        "ev": raw["event_type"].astype(float).astype(int).to_numpy(),
        "cpu": numeric(raw, "cpu_request")[0],
        "mem": numeric(raw, "memory_request")[0],
        "disk": numeric(raw, "disk_request")[0],
        "diff": numeric(raw, "different_machine")[0],
        "file": raw["_file"].to_numpy(), "line": raw["_line"].to_numpy()})
    f = f.sort_values(["job", "task", "time", "file", "line"], kind="stable").reset_index(drop=True)
    f["pos"] = np.arange(len(f))
    keys = ["job", "task"]
    f[["cpu", "mem"]] = f.groupby(keys)[["cpu", "mem"]].ffill()
    tasks = f.groupby(keys).agg(first=("time", "min"), last_file=("file", "last"), last_line=("line", "last"),
                                diff=("diff", "max"), disk=("disk", "max"))
    tasks["submit"] = f[f.ev == SUBMIT].groupby(keys)["time"].min()
    sched = f[f.ev == SCHEDULE].groupby(keys).tail(1).set_index(keys)
    tasks = tasks.join(sched[["time", "pos", "cpu", "mem"]].rename(columns={"time": "s_time", "pos": "s_pos"}))
    end = f[f.ev.isin(END_EVENTS)].groupby(keys).tail(1).set_index(keys)
    tasks = tasks.join(end[["time", "pos", "ev"]].rename(columns={"time": "e_time", "pos": "e_pos", "ev": "e_ev"}))
    trace_end = float(f["time"].max()) if len(f) else 0.0

    never = tasks["s_pos"].isna()
    running = ~never & ~(tasks["e_pos"] > tasks["s_pos"])
    ended_badly = ~never & ~running & (tasks["e_ev"] != FINISH)
    end_time = tasks["e_time"].where(~running, trace_end)
    duration = (end_time - tasks["s_time"]) / 1e6
    rules = [(never, "never scheduled")]
    if unfinished == "skip":
        rules.append((running, "still running at the end of the trace"))
        for ev, name in EVENT_NAMES.items():
            if ev != FINISH:
                rules.append((ended_badly & (tasks["e_ev"] == ev), f"last attempt ended in {name}"))
    else:
        report.note("unfinished tasks ended at their last event or the trace end", int((running | ended_badly).sum()))
    rules.append((~(duration > 0), "duration is not positive"))
    rules.append((~(tasks["cpu"].fillna(0) > 0) & ~(tasks["mem"].fillna(0) > 0),
                  "requests neither CPU nor memory"))
    keep = np.ones(len(tasks), dtype=bool)
    for mask, reason in rules:
        mask = mask.to_numpy(dtype=bool) & keep
        for k, path in enumerate(files):
            rows = tasks["last_line"].to_numpy()[mask & (tasks["last_file"].to_numpy() == k)]
            report.skip_rows(f"task {reason}", rows, file=path, field="event_type", rule=True)
        keep &= ~mask
    kept = tasks[keep].assign(duration=duration[keep])
    report.note("tasks with the different-machine flag (not modelled)", int((kept["diff"] == 1).sum()))
    report.note("tasks with a disk request (not modelled)", int((kept["disk"] > 0).sum()))
    report.note("tasks with no SUBMIT event (submitted at their first event)", int(kept["submit"].isna().sum()))
    kept = kept.assign(submit=kept["submit"].fillna(kept["first"]))
    return _group(kept, task_constraints(tables, report))


def _group(kept, constraints: dict) -> list[JobSpec]:
    """One rayrm job per (job, CPU request, memory request, constraint)."""
    none = Constraint()
    jobs: list[JobSpec] = []
    current, groups = None, {}

    def flush():
        for k, (key, members) in enumerate(groups.items(), start=1):
            cpu, mem, cstr = key
            c = members[0][3]
            app_id = str(current) if len(groups) == 1 else f"{current}-{k}"
            submit = seconds(min(m[1] for m in members))
            app = AppSpec(app_id, Resources(cpu=cpu, memory=mem), len(members), 1.0, submit, c)
            jobs.append(JobSpec(app, Durations("list", values=tuple(round(m[2], 6) for m in members))))

    for (job, task), row in zip(kept.index, kept.itertuples(index=False)):
        if job != current:
            flush()
            current, groups = job, {}
        c = constraints.get((job, task), none)
        cpu = 0.0 if np.isnan(row.cpu) else float(row.cpu)
        mem = 0.0 if np.isnan(row.mem) else float(row.mem)
        groups.setdefault((cpu, mem, str(c)), []).append((task, row.submit, float(row.duration), c))
    flush()
    return jobs


def import_google2011(inputs, report: SkipReport, *, unfinished: str = "skip") -> ImportResult:
    inputs = [inputs] if isinstance(inputs, (str, Path)) else list(inputs)
    tables = find_tables(inputs)
    nodes, events = machines(tables, report)
    jobs = task_jobs(tables, report, unfinished=unfinished)
    return ImportResult(nodes, jobs, events, description="Google ClusterData 2011 (rayrm trace import google2011)")
