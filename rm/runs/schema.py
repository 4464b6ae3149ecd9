"""The run directory's schema: one definition for its writer and its readers.

``rayrm.rm.runs.log.RunLog`` writes a run directory and ``rayrm.rm.runs.reader.RunDir``
reads it back (``check``, ``report``, ``compare``, ``metrics``, the sensitivity sweep and
the twin); both take their column lists and types from here.  A run directory holds::

    nodes.csv    node, <dim>..., attr.<name>..., [ray_node]          one row per node
    jobs.csv     app, status, num_tasks, weight, demand.<dim>..., constraint, submit,
                 first_start, finish, queueing_delay, completion_time, reason, [queue, user]
    tasks.csv    app, task, attempt, node, submit, start, finish, status
    shares.csv   time, app, task_share, dominant_share, cpu_share, mem_share, running
    events.csv   time, wall_time, kind, app, task, container, node, detail
    summary.json the headline numbers (``SUMMARY_KEYS``)
    queues.json  the config's queue tree (its ``queues:`` list), only when it has one

The three large tables — tasks, shares and events — may be Parquet files instead
(``tasks.parquet`` ...; ``--format parquet``, chosen by itself above ``PARQUET_FROM``
task rows); nodes.csv and jobs.csv stay CSV.  A reader takes whichever it finds.

Column kinds: ``str``; ``int``; ``float`` (required); ``float?`` (may be empty, read as
NaN).  In CSV an empty cell is a missing value; in Parquet, a null.  Times are trace
seconds, written to 6 decimals; ``wall_time`` is seconds since a replay's clock started
(empty in the simulator).  ``events.task`` and ``events.container`` are text, since an
event without a task leaves them empty.

Rows:

* tasks: one per task *attempt*; ``submit`` is when this attempt was asked for, ``status``
  one of ``TASK_STATUSES``.  Rows are in the order attempts end (the still running ones
  last, in the order they started), so a writer can stream them.
* shares: an app's shares whenever its running count (or h_i) changes, one row per app
  and instant, so a time-weighted average over them is exact.
* events: everything else that happened, in time order (node_join, submit, start,
  finished, lost, killed, app_finished, ...).
"""

from __future__ import annotations

# column -> kind, in file order
TASKS = {"app": "str", "task": "int", "attempt": "int", "node": "str", "submit": "float",
         "start": "float?", "finish": "float?", "status": "str"}
SHARES = {"time": "float", "app": "str", "task_share": "float?", "dominant_share": "float?",
          "cpu_share": "float?", "mem_share": "float?", "running": "float?"}
EVENTS = {"time": "float", "wall_time": "float?", "kind": "str", "app": "str", "task": "str",
          "container": "str", "node": "str", "detail": "str"}
# jobs.csv: these, with demand.<dim> (float) after ``weight``; every other column is text.
JOBS = {"app": "str", "status": "str", "num_tasks": "int", "weight": "float", "constraint": "str",
        "submit": "float", "first_start": "float?", "finish": "float?", "queueing_delay": "float?",
        "completion_time": "float?", "reason": "str", "queue": "str", "user": "str"}
JOBS_PREFIXED = {"demand.": "float"}
#: jobs.csv columns a reader fills in when a directory lacks them: the leaf and user of a job
JOBS_DEFAULTS = {"queue": "root.default", "user": "default"}
# nodes.csv: node, then one capacity column per resource dimension (float), attr.<name>
# (text, "" for an absent attribute) and, in a Ray run, ray_node.
NODES = {"node": "str"}
NODES_PREFIXED = {"attr.": "str", "ray_node": "str"}
NODE_META = ("node", "ray_node")

#: the large tables, which may be CSV or Parquet, and their columns
TABLES = {"tasks": TASKS, "shares": SHARES, "events": EVENTS}

#: tasks.status: an attempt is 'running' until it ends as one of the others; 'preempted'
#: (killed at a preemption's deadline, its task run again) only in runs with preemption on
TASK_STATUSES = ("running", "finished", "lost", "killed")
PREEMPTED = "preempted"

FORMATS = ("csv", "parquet")
#: task rows above which ``--format auto`` writes Parquet
PARQUET_FROM = 1_000_000

#: summary.json: key -> meaning.  Percentile dicts hold p50, p90, p99, mean, max.
SUMMARY_KEYS = {
    "name": "the config's name",
    "policy": "the policy that ran",
    "mode": "sim, replay or native",
    "seed": "the seed of the task durations",
    "makespan": "last task finish − first job submit (s)",
    "jobs": "job status -> count",
    "tasks": "attempt status -> count (TASK_STATUSES)",
    "job_queueing_delay": "percentiles of first start − submit over started jobs",
    "job_completion_time": "percentiles of finish − submit over finished jobs",
    "task_queueing_delay": "percentiles of start − submit over every started attempt",
    "utilization": "dim -> Σ d_app (finish − start) / (Σ_m C_m × makespan)",
    "wall_seconds": "wall time of the run (s)",
    "format": "csv or parquet: how tasks, shares and events are stored",
}


def job_columns(dims, with_queues: bool = True) -> list[str]:
    """jobs.csv's header for these resource dimensions; ``with_queues``: with the queue and
    user columns, which a run whose jobs all sit in root.default as user default leaves
    out (its readers fill in ``JOBS_DEFAULTS``), so that such a run reads as it did before
    queues existed, byte for byte."""
    head = [c for c in JOBS if with_queues or c not in JOBS_DEFAULTS]
    at = head.index("weight") + 1
    return head[:at] + [f"demand.{d}" for d in dims] + head[at:]


def node_columns(dims, attributes, with_ray: bool) -> list[str]:
    """nodes.csv's header."""
    return ["node", *dims, *(f"attr.{a}" for a in attributes)] + (["ray_node"] if with_ray else [])


#: the columns written to 6 decimals (times and shares; ``running`` is a count)
ROUNDED = {"tasks": ("submit", "start", "finish"),
           "shares": ("time", "task_share", "dominant_share", "cpu_share", "mem_share"),
           "events": ("time", "wall_time")}


def rounded_positions(table: str) -> tuple[int, ...]:
    """Positions of a large table's columns written to 6 decimals."""
    return tuple(i for i, c in enumerate(TABLES[table]) if c in ROUNDED[table])


def arrow_schema(table: str):
    """The pyarrow schema of a large table in Parquet (pyarrow imported only here)."""
    import pyarrow as pa  # noqa: PLC0415 (heavy: only when Parquet is written or read)

    types = {"str": pa.string(), "int": pa.int64(), "float": pa.float64(), "float?": pa.float64()}
    return pa.schema([pa.field(c, types[k], nullable=k != "int" and k != "float")
                      for c, k in TABLES[table].items()])
