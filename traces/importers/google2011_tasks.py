"""Google ClusterData 2011: tasks and their constraints into rayrm jobs (see ``google2011.py``)."""

from __future__ import annotations

import numpy as np

from rayrm.rm.core.jobs import Durations, JobSpec
from rayrm.rm.core.constraints import Clause, Constraint
from rayrm.rm.core.model import AppSpec, Resources
from rayrm.traces.importers.common import SkipReport, numeric, token
from rayrm.traces.importers.google2011 import attr_name, checked, code_check, number_checks, read, seconds

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
