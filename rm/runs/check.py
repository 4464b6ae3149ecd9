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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.errors import InputError
from rayrm.rm.runs.reader import RunDir

REL_TOL = 1e-9
PER_CONTAINER_TOL = 1e-6
MAX_EXAMPLES = 5


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
    interrupted: str = ""              # a partial run: why it stopped ('' for a whole run)
    jobs_unfinished: int = 0           # jobs it left unfinished (not required to be complete)
    attempts_by_status: dict[str, int] = field(default_factory=dict)
    reruns: int = 0
    examples: dict[str, list[str]] = field(default_factory=dict)

    VIOLATIONS = ("over_allocations", "constraint_violations", "tasks_missing", "finished_twice",
                  "unexpected_attempts")

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
                 f"  unexpected attempts    {self.unexpected_attempts}"]
        for kind, found in self.examples.items():
            lines += [f"  e.g. {kind.replace('_', ' ')}: {text}" for text in found]
        lines.append("  OK" if self.ok else "  VIOLATED")
        return "\n".join(lines)


def check_run(path: str | Path) -> CheckResult:
    """Check one run directory; raises InputError when it cannot be read."""
    run = RunDir(path)
    nodes, jobs, tasks, dims = run.nodes, run.jobs, run.tasks, run.dims
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
    per_task = tasks.groupby(["app", "task"]).size()
    result.reruns = int((per_task > 1).sum())
    _check_exactly_once(accepted, jobs, tasks, result,
                        required=accepted[accepted["status"] != "unfinished"] if result.interrupted else accepted)
    _check_constraints(run, jobs, tasks, result)
    _check_capacity(nodes, jobs, tasks, dims, result)
    return result


def _check_exactly_once(accepted, jobs, tasks, result: CheckResult, required=None) -> None:
    """Every task of the ``required`` jobs (default: all accepted) finished exactly once;
    no attempt of a task a job does not have."""
    size = dict(zip(accepted["app"], accepted["num_tasks"]))
    known = np.array([size.get(a, -1) for a in tasks["app"]], dtype=np.int64)
    in_range = (tasks["task"].to_numpy() >= 0) & (tasks["task"].to_numpy() < known)
    for row in tasks[~in_range].head(MAX_EXAMPLES).itertuples(index=False):
        why = ("its job is rejected" if row.app in set(jobs["app"]) else "its job is not in jobs.csv") \
            if row.app not in size else f"the job has {size[row.app]} tasks"
        result.note("unexpected_attempts", f"{row.app} task {row.task} attempt {row.attempt}: {why}")
    result.unexpected_attempts = int((~in_range).sum())
    done = tasks[in_range & (tasks["status"] == "finished").to_numpy()]
    counts = done.groupby(["app", "task"]).size()
    result.finished_twice = int((counts > 1).sum())
    for (app, task), n in counts[counts > 1].head(MAX_EXAMPLES).items():
        result.note("finished_twice", f"{app} task {task} finished {n} times")
    need = dict(zip(required["app"], required["num_tasks"])) if required is not None else size
    have = counts.groupby(level=0).size() if len(counts) else {}
    result.tasks_missing = int(sum(max(0, n - int(have.get(app, 0))) for app, n in need.items()))
    if result.tasks_missing:
        for app, n in need.items():
            if have.get(app, 0) < n:
                result.note("tasks_missing", f"{app}: {n - have.get(app, 0)} of {n} tasks never finished")
                if len(result.examples["tasks_missing"]) >= MAX_EXAMPLES:
                    break


def _check_constraints(run: RunDir, jobs, tasks, result: CheckResult) -> None:
    attributes = run.node_attributes()
    parsed: dict[str, Constraint] = {}
    for i, text in enumerate(jobs["constraint"]):
        if text not in parsed:
            try:
                parsed[text] = Constraint.parse(text)
            except InputError as e:
                raise e.at(file=str(run.path / "jobs.csv"), row=i + 2, field="constraint") from None
    constraint_of = dict(zip(jobs["app"], jobs["constraint"]))
    verdict: dict[tuple[str, str], str] = {}
    pairs = tasks[["app", "node"]].to_numpy()
    for app, node in pairs:
        text = constraint_of.get(app)
        if text is None:
            continue                       # counted as unexpected already
        key = (text, node)
        if key not in verdict:
            if node not in attributes:
                verdict[key] = "a node nodes.csv does not list"
            elif not parsed[text].matches(node, attributes[node]):
                verdict[key] = f"'{text}' does not hold there"
            else:
                verdict[key] = ""
        if verdict[key]:
            result.constraint_violations += 1
            result.note("constraint_violations", f"{app} ran on {node}: {verdict[key]}")


def _check_capacity(nodes, jobs, tasks, dims, result: CheckResult) -> None:
    demand_cols = sorted({c[len("demand."):] for c in jobs.columns if c.startswith("demand.")} | set(dims))
    cap = {n: np.array([row.get(d, 0.0) if d in dims else 0.0 for d in demand_cols], dtype=float)
           for n, row in zip(nodes["node"], nodes.to_dict("records"))}
    demand = {a: np.array([row.get(f"demand.{d}", 0.0) for d in demand_cols], dtype=float)
              for a, row in zip(jobs["app"], jobs.to_dict("records"))}
    started = tasks[tasks["start"].notna() & tasks["app"].isin(demand) & tasks["node"].isin(cap)]
    for node, group in started.groupby("node", sort=False):
        start = group["start"].to_numpy()
        finish = np.maximum(np.nan_to_num(group["finish"].to_numpy(), nan=np.inf), start)
        d = np.stack([demand[a] for a in group["app"]])
        times = np.concatenate([finish, start])
        kind = np.concatenate([np.zeros(len(start)), np.ones(len(start))])    # 0 release, 1 start
        delta = np.concatenate([-d, d])
        order = np.lexsort((kind, times))
        used = np.cumsum(delta[order], axis=0)
        running = np.cumsum(np.where(kind[order] == 1, 1, -1))
        limit = cap[node] * (1 + REL_TOL) + PER_CONTAINER_TOL * running[:, None]
        over = (used > limit).any(axis=1) & (kind[order] == 1)
        result.over_allocations += int(over.sum())
        for k in np.flatnonzero(over)[:MAX_EXAMPLES]:
            r = int(np.argmax(used[k] - limit[k]))
            result.note("over_allocations",
                        f"{node} at t={times[order][k]:g}: {demand_cols[r]} {used[k, r]:g} "
                        f"in use of {cap[node][r]:g}")
