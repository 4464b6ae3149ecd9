"""``rayrm check``: a run directory's invariants, verified from the directory alone.

docs/design.md's three invariants, for the simulator and the Ray replay alike:

1. **No node is ever over-allocated.**  Per node, sweep the attempts of tasks.csv in
   time order — +d_i at ``start``, −d_i at ``finish`` (an attempt still ``running``
   holds its resources to the end) — with releases before starts at equal timestamps,
   since a container that ends at t frees its node for one starting at t.  After each
   start, every dimension r must satisfy

       Σ_{attempts a running on m} d_{app(a), r}  <=  C_{m,r} (1 + 1e-9) + 1e-6 · n_m

   where n_m is the number of attempts running on m: run-log cells are rounded to 6
   decimals, so each demand may read up to 5e-7 high.  Capacities come from
   nodes.csv, demands from jobs.csv ``demand.<dim>`` (a dimension a node does not
   list has capacity 0 there).
2. **No container runs where its constraint forbids.**  Each job's constraint text
   is parsed again (``Constraint.parse``) and matched against the node's name and
   ``attr.<name>`` cells (an empty cell is an absent attribute).  An attempt on a node
   nodes.csv does not list counts here too.
3. **Every task of every accepted job finishes exactly once.**  For each job whose
   status is not ``rejected`` and each task 0..num_tasks−1, count the tasks.csv rows
   with status ``finished``: 0 is a missing task, more than 1 a task finished twice.
   Attempts of rejected or unknown jobs, or with a task index out of range, are
   "unexpected".  A task may have several attempts — lost with its node, killed, a
   new attempt after a failure — and still finishes exactly once; the report counts
   attempts by status and the tasks that needed more than one (``reruns``), which
   are not violations.
4. and 5. **Nothing runs or finishes on a node the RM held lost** (a killed or partitioned
   NM): ``rayrm.rm.runs.check_faults``.
6. **No queue holds more than its max or runs more than max_apps apps** (a run with a
   queue tree, queues.json): ``rayrm.rm.runs.queues``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.errors import InputError
from rayrm.rm.runs.check_faults import LOSS_KINDS, check_lost_nodes
from rayrm.rm.runs.queues import check_queue_caps
from rayrm.rm.runs.reader import RunDir

REL_TOL = 1e-9
PER_CONTAINER_TOL = 1e-6
MAX_EXAMPLES = 5
#: the most (constraint, node) pair codes the constraint check marks in a table of flags
#: (a byte each); beyond, it sorts the rows' pairs to find those that occur
MARKED_PAIRS = 1 << 26


@dataclass
class CheckResult:
    """Counts of what was checked and what was wrong, with a few examples of each."""

    run: str
    jobs_accepted: int = 0
    jobs_rejected: int = 0
    tasks: int = 0
    attempts: int = 0
    over_allocations: int = 0
    constraint_violations: int = 0
    tasks_missing: int = 0
    finished_twice: int = 0
    unexpected_attempts: int = 0
    started_on_lost: int = 0
    finished_on_lost: int = 0
    queue_over_max: int = 0            # starts that took a queue above its max
    queue_over_max_apps: int = 0       # apps that started a queue above its max_apps
    queues_checked: int = 0            # queues of the run's tree (0: it had none)
    interrupted: str = ""              # a partial run: why it stopped ('' for a whole run)
    jobs_unfinished: int = 0           # jobs it left unfinished (not required to be complete)
    attempts_by_status: dict[str, int] = field(default_factory=dict)
    reruns: int = 0
    examples: dict[str, list[str]] = field(default_factory=dict)

    VIOLATIONS = ("over_allocations", "constraint_violations", "tasks_missing", "finished_twice",
                  "unexpected_attempts", "started_on_lost", "finished_on_lost", "queue_over_max",
                  "queue_over_max_apps")

    @property
    def ok(self) -> bool:
        return not any(getattr(self, k) for k in self.VIOLATIONS)

    def note(self, kind: str, text: str) -> None:
        found = self.examples.setdefault(kind, [])
        if len(found) < MAX_EXAMPLES:
            found.append(text)

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("run", "jobs_accepted", "jobs_rejected", "tasks",
                                              "attempts", "attempts_by_status", "reruns",
                                              *self.VIOLATIONS)} | {"ok": self.ok}

    def report(self) -> str:
        lines = [f"{self.run}"]
        if self.interrupted:
            lines.append(f"  partial run ({self.interrupted}): {self.jobs_unfinished} unfinished jobs "
                         f"checked for what ran, not for completeness")
        lines += [f"  tasks checked          {self.tasks}  ({self.jobs_accepted} accepted jobs, "
                 f"{self.jobs_rejected} rejected)",
                 f"  attempts checked       {self.attempts}  ("
                 + ", ".join(f"{n} {k}" for k, n in sorted(self.attempts_by_status.items()))
                 + f"; {self.reruns} tasks needed more than one)",
                 f"  over-allocations       {self.over_allocations}",
                 f"  constraint violations  {self.constraint_violations}",
                 f"  tasks missing          {self.tasks_missing}",
                 f"  finished twice         {self.finished_twice}",
                 f"  unexpected attempts    {self.unexpected_attempts}",
                 f"  on a node held lost    {self.started_on_lost} started, {self.finished_on_lost} finished"]
        if self.queues_checked:
            lines.append(f"  queues above max       {self.queue_over_max} starts, {self.queue_over_max_apps} apps "
                         f"above max_apps ({self.queues_checked} queues)")
        for kind, found in self.examples.items():
            lines += [f"  e.g. {kind.replace('_', ' ')}: {text}" for text in found]
        lines.append("  OK" if self.ok else "  VIOLATED")
        return "\n".join(lines)


def check_run(path: str | Path) -> CheckResult:
    """Check one run directory; raises InputError when it cannot be read.

    Columnar throughout (apps and nodes as integer codes, no loop over rows in Python),
    so a run of tens of millions of attempts checks in minutes.
    """
    run = RunDir(path)
    nodes, jobs, tasks, dims = run.nodes, run.jobs, run.coded_tasks, run.dims
    result = CheckResult(str(path))
    accepted = jobs[jobs["status"] != "rejected"]
    result.jobs_accepted, result.jobs_rejected = len(accepted), len(jobs) - len(accepted)
    summary = run.summary if (run.path / "summary.json").exists() else {}
    if summary.get("interrupted"):
        # a run stopped early (Ctrl-C, SIGTERM, --until): what ran must be right, and the
        # jobs it did not finish are not required to have every task
        result.interrupted = str(summary.get("interrupt_reason") or "interrupted")
        result.jobs_unfinished = int((accepted["status"] == "unfinished").sum())
    result.tasks = int(accepted["num_tasks"].sum())
    result.attempts = len(tasks)
    result.attempts_by_status = {str(k): int(v) for k, v in tasks["status"].value_counts().items()}
    # apps as codes in sorted order, so that (app, task) keys sort as groupby sorts them
    codes, apps = pd.factorize(tasks["app"], sort=True)
    _check_exactly_once(accepted, jobs, tasks, codes, apps, result,
                        required=accepted[accepted["status"] != "unfinished"] if result.interrupted else accepted)
    _check_constraints(run, jobs, tasks, codes, apps, result)
    _check_capacity(nodes, jobs, tasks, codes, apps, dims, result)
    check_lost_nodes(run.events_of(LOSS_KINDS), tasks, result)
    check_queue_caps(run, tasks, result)
    return result


def _check_exactly_once(accepted, jobs, tasks, codes, apps, result: CheckResult, required) -> None:
    """Every task of the ``required`` jobs (all accepted ones, or of an interrupted run
    those not marked unfinished) finished exactly once; no attempt of a task a job does
    not have; and the tasks that needed more than one attempt (``reruns``).  Its arrays,
    one per attempt, go when it returns (a day's run has tens of millions)."""
    task = tasks["task"].to_numpy(dtype=np.int64)
    # one integer per (app, task): app code × width + task − lowest task index
    low = int(min(task.min(initial=0), 0))
    width = int(task.max(initial=0)) - low + 1
    key = codes.astype(np.int64, copy=False) * width + (task - low)
    result.reruns = int((np.unique(key, return_counts=True)[1] > 1).sum())
    size = dict(zip(accepted["app"], accepted["num_tasks"]))
    known = np.array([size.get(a, -1) for a in apps], dtype=np.int64)[codes] if len(apps) \
        else np.zeros(0, dtype=np.int64)
    in_range = (task >= 0) & (task < known)
    all_apps = set(jobs["app"])
    for row in tasks[~in_range].head(MAX_EXAMPLES).itertuples(index=False):
        why = ("its job is rejected" if row.app in all_apps else "its job is not in jobs.csv") \
            if row.app not in size else f"the job has {size[row.app]} tasks"
        result.note("unexpected_attempts", f"{row.app} task {row.task} attempt {row.attempt}: {why}")
    result.unexpected_attempts = int((~in_range).sum())
    done = in_range & (tasks["status"] == "finished").to_numpy()
    # finished (app, task) keys, sorted by app, then task
    keys, counts = np.unique(key[done], return_counts=True)
    twice = np.flatnonzero(counts > 1)
    result.finished_twice = len(twice)
    for k in twice[:MAX_EXAMPLES]:
        result.note("finished_twice", f"{apps[keys[k] // width]} task {keys[k] % width + low} finished {counts[k]} times")
    have = np.bincount(keys // width, minlength=len(apps))
    code_of = {a: i for i, a in enumerate(apps)}
    need = dict(zip(required["app"], required["num_tasks"]))
    missing = {app: int(n) - (int(have[code_of[app]]) if app in code_of else 0) for app, n in need.items()}
    result.tasks_missing = sum(m for m in missing.values() if m > 0)
    if result.tasks_missing:
        for app, m in missing.items():
            if m > 0:
                result.note("tasks_missing", f"{app}: {m} of {need[app]} tasks never finished")
                if len(result.examples["tasks_missing"]) >= MAX_EXAMPLES:
                    break


def _check_constraints(run: RunDir, jobs, tasks, codes, apps, result: CheckResult) -> None:
    """Each (constraint, node) pair that occurs is judged once — constraints and nodes are
    few beside the attempts — and each row takes its pair's verdict in one array lookup."""
    attributes = run.node_attributes()
    parsed: dict[str, Constraint] = {}
    for i, text in enumerate(jobs["constraint"]):
        if text not in parsed:
            try:
                parsed[text] = Constraint.parse(text)
            except InputError as e:
                raise e.at(file=str(run.path / "jobs.csv"), row=i + 2, field="constraint") from None
    texts = list(parsed)
    code_of = {text: c for c, text in enumerate(texts)}
    constraint_of = dict(zip(jobs["app"], jobs["constraint"]))
    # each app's constraint as a code; len(texts) for an app jobs.csv does not list (its
    # attempts are counted as unexpected already)
    of_app = np.array([code_of.get(constraint_of.get(a), len(texts)) for a in apps], dtype=np.int64)
    node_codes, node_names = pd.factorize(tasks["node"])
    n = max(len(node_names), 1)
    pair = of_app[codes] * n + node_codes if len(apps) else np.zeros(0, dtype=np.int64)
    space = (len(texts) + 1) * n
    if space <= MARKED_PAIRS:               # the pairs that occur, marked (no sort)
        seen = np.zeros(space, dtype=bool)
        seen[pair] = True
        pairs = np.flatnonzero(seen)
    else:
        pairs = np.unique(pair)
    why: dict[int, str] = {}
    for p in pairs.tolist():
        c, m = divmod(p, n)
        if c == len(texts):
            continue
        text, node = texts[c], node_names[m]
        if node not in attributes:
            why[p] = "a node nodes.csv does not list"
        elif not parsed[text].matches(node, attributes[node]):
            why[p] = f"'{text}' does not hold there"
    bad = np.isin(pair, np.fromiter(why, dtype=np.int64, count=len(why))) if why \
        else np.zeros(len(pair), dtype=bool)
    result.constraint_violations = int(bad.sum())
    for i in np.flatnonzero(bad)[:MAX_EXAMPLES]:
        result.note("constraint_violations",
                    f"{apps[codes[i]]} ran on {node_names[node_codes[i]]}: {why[int(pair[i])]}")


def _check_capacity(nodes, jobs, tasks, codes, apps, dims, result: CheckResult) -> None:
    demand_cols = sorted({c[len("demand."):] for c in jobs.columns if c.startswith("demand.")} | set(dims))
    cap = {n: np.array([row.get(d, 0.0) if d in dims else 0.0 for d in demand_cols], dtype=float)
           for n, row in zip(nodes["node"], nodes.to_dict("records"))}
    demand = {a: np.array([row.get(f"demand.{d}", 0.0) for d in demand_cols], dtype=float)
              for a, row in zip(jobs["app"], jobs.to_dict("records"))}
    # demand per app code; apps jobs.csv does not list are left out, as nodes it does not list
    known_app = np.array([a in demand for a in apps], dtype=bool)
    per_app = np.array([demand.get(a, np.zeros(len(demand_cols))) for a in apps],
                       dtype=float).reshape(len(apps), len(demand_cols))
    start_all = tasks["start"].to_numpy(dtype=float)
    keep = ~np.isnan(start_all) & (known_app[codes] if len(apps) else np.zeros(0, dtype=bool)) \
        & tasks["node"].isin(cap).to_numpy()
    rows = np.flatnonzero(keep)
    node_codes, node_names = pd.factorize(tasks["node"].iloc[rows])
    order = np.argsort(node_codes, kind="stable")      # each node's rows, in file order
    bounds = np.searchsorted(node_codes[order], np.arange(len(node_names) + 1))
    finish_all = tasks["finish"].to_numpy(dtype=float)
    for k, node in enumerate(node_names):
        idx = rows[order[bounds[k]:bounds[k + 1]]]
        start = start_all[idx]
        finish = np.maximum(np.nan_to_num(finish_all[idx], nan=np.inf), start)
        d = per_app[codes[idx]]
        times = np.concatenate([finish, start])
        kind = np.concatenate([np.zeros(len(start)), np.ones(len(start))])    # 0 release, 1 start
        delta = np.concatenate([-d, d])
        sweep = np.lexsort((kind, times))
        used = np.cumsum(delta[sweep], axis=0)
        running = np.cumsum(np.where(kind[sweep] == 1, 1, -1))
        limit = cap[node] * (1 + REL_TOL) + PER_CONTAINER_TOL * running[:, None]
        over = (used > limit).any(axis=1) & (kind[sweep] == 1)
        result.over_allocations += int(over.sum())
        for j in np.flatnonzero(over)[:MAX_EXAMPLES]:
            r = int(np.argmax(used[j] - limit[j]))
            result.note("over_allocations",
                        f"{node} at t={times[sweep][j]:g}: {demand_cols[r]} {used[j, r]:g} "
                        f"in use of {cap[node][r]:g}")
