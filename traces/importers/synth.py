"""SLS SYNTH workload specs (``SynthTraceJobProducer``) as SLS job objects, for ``sls.py``.

A SYNTH spec is one JSON object: ``num_nodes``, ``nodes_per_rack``, ``num_jobs``,
``rand_seed`` and ``workloads``, each with ``workload_weight``, ``queue_name``,
``job_classes`` and ``time_distribution`` (``[{time: s, weight: w}, ...]``).  A job
class is written in one of two forms:

* **flat** (SLS's first form): ``mtasks_avg/_stddev``, ``rtasks_avg/_stddev``,
  ``mtime_avg/_stddev``, ``rtime_avg/_stddev``, ``map_max_memory_avg/_stddev``,
  ``reduce_max_memory_avg/_stddev``, ``map_max_vcores_avg/_stddev``,
  ``reduce_max_vcores_avg/_stddev``, ``dur_avg/_stddev``; read, as SLS does, as a
  map task and a reduce task of the generic form (a missing field is 0);
* **generic**: ``type`` (``mapreduce``, or ``stream``), ``duration`` and ``tasks``, a
  list of ``{type, count, time, max_memory, max_vcores}``.

Every number is a *sample*: ``{"val": v}`` is the constant v; ``{"val": m, "std": s}``
draws from a log-normal of mean m and standard deviation s (``"dist": "NORM"``: a
normal), an ``s`` of 0 meaning m/6 and a mean not above 0 giving 0;
``{"discrete": [...], "weights": [...]}`` picks one value (weights default equal).
The log-normal has sigma^2 = ln(1 + s^2/m^2) and mu = ln(m) - sigma^2/2 (SynthUtils).

Generation, as ``SynthTraceJobProducer`` and ``SynthJob`` do, drawn from one numpy
generator seeded with ``rand_seed`` (so a spec always gives the same jobs, though not
the numbers Java's generator would draw):

* each of ``num_jobs`` jobs picks a workload by weight, a submit time (a bucket of
  ``time_distribution`` by weight, then uniformly in whole seconds up to the next
  bucket's time) and a job class by weight; jobs are ordered by submit time and named
  ``<class_name>_<nnnnnn>`` in that order;
* per task definition: a count (rounded), then one memory and one vcores value for all
  its tasks, raised to at least 1024 MB and 1 vcore (SynthJob's minimums), and a
  time per task.  Task times are milliseconds, as SLS hands them to its containers
  (``--synth-time-unit s`` reads them as seconds: SLS's flat-form sample says
  "durations in sec" yet SLS runs them as ms).  A time below 1 ms is 1 ms (noted);
* ``type: stream`` (SLS's StreamAMSimulator keeps each stream's container running,
  restarting it when it ends, until the job's ``duration`` ends): each stream is one
  task lasting the job's drawn ``duration`` (seconds), with the stream's resources.

Not used: ``deadline_factor``, ``reservation`` (no reservations in rayrm), ``priority``,
``execution_type``, ``user_name``, ``params``.  SLS also gives each synthetic task a
random host as a locality hint; rayrm has no locality, so none is drawn.

Nodes: ``num_nodes`` nodes ``node0..`` in ``num_nodes // nodes_per_rack`` racks,
node i in ``rack<i mod racks>`` (SLSUtils.generateNodes), each with SLS's node
default (``--nm-resource``), unless a node file is given.

Sizes are refused, naming the field, before they are drawn: ``num_jobs`` above
100,000, ``num_nodes`` above 1,000,000, and a task count that would take the
spec's tasks (all jobs) past 10,000,000 (SLS's own specs draw tens of jobs of tens
of tasks; SWIM's whole FB-2010 day is 22.7 M tasks over 24,442 jobs).  A job of a map
and a reduce definition takes ~100 us and ~4 KB to draw and import, a task tens of bytes.
"""

from __future__ import annotations

import math

import numpy as np

from rayrm.rm.core.config import MAX_GROUP
from rayrm.rm.core.errors import InputError

MIN_MEMORY_MB, MIN_VCORES = 1024, 1
#: SLS reads these as Java ints; larger values are refused here as they would be there
JAVA_INT_MAX = 2 ** 31 - 1
#: a spec drawing more tasks (in all its jobs), more jobs or more nodes than these is refused
#: before drawing them, rather than filling memory; SLS's own specs draw tens of jobs
MAX_TASKS, MAX_JOBS = 10_000_000, 100_000


def is_synth(obj) -> bool:
    return isinstance(obj, dict) and "workloads" in obj


def synth_to_sls(spec: dict, path: str, *, time_unit: str = "ms",
                 seed: int | None = None) -> tuple[list[dict], list[tuple[str, str]]]:
    """(SLS job objects, [(rack, node), ...]) drawn from one SYNTH spec (see the module
    docstring); ``seed`` replaces the spec's ``rand_seed``: the same workload, other draws."""
    where = _Where(path)
    # SLS seeds Java's Random with any int; numpy takes non-negative seeds, so a negative one
    # is read as its 32-bit two's complement (-1 -> 2**32 - 1), one seed per int as in Java
    drawn_by = seed if seed is not None else _whole(spec.get("rand_seed", 0), where("rand_seed"), minimum=None)
    rng = np.random.default_rng(drawn_by % 2 ** 32)
    workloads = spec.get("workloads")
    if not isinstance(workloads, list) or not workloads:
        raise InputError("needs a non-empty list of workloads", file=path, field="workloads")
    num_jobs = _whole(spec.get("num_jobs", 0), where("num_jobs"))
    nodes = _nodes(spec, where)
    if num_jobs > MAX_JOBS:
        raise _error(where("num_jobs"), f"at most {MAX_JOBS:,} jobs, got {num_jobs:,}")
    prepared = [_Workload(w, where(f"workloads[{k}]")) for k, w in enumerate(workloads)]
    w_weights = [w.weight for w in prepared]
    _check_weights(w_weights, where("workloads[*].workload_weight"))
    drawn = []
    for _ in range(num_jobs):
        w = prepared[_weighted(rng, w_weights)]
        submit = w.submission(rng)
        drawn.append((submit, w, w.job_class(rng)))
    drawn.sort(key=lambda d: d[0])                       # stable: equal times keep draw order
    scale = 1.0 if time_unit == "ms" else 1000.0
    jobs, tasks = [], 0
    for index, (submit, w, cls) in enumerate(drawn):
        job_tasks, n = cls.tasks(rng, scale, MAX_TASKS - tasks)
        jobs.append({"job.id": f"{cls.name}_{index:06d}", "job.start.ms": submit * 1000.0,
                     "job.queue.name": w.queue, "job.user": cls.user, "job.tasks": job_tasks})
        tasks += n
    return jobs, nodes


class _Where:
    def __init__(self, path: str):
        self.path = path

    def __call__(self, field: str) -> tuple[str, str]:
        return self.path, field


def _error(where, message: str) -> InputError:
    return InputError(message, file=where[0], field=where[1])


def _finite(value) -> bool:
    """A JSON number (not a boolean) a float can hold: 10**400 cannot (math.isfinite overflows)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _whole(value, where, minimum: int | None = 0) -> int:
    low = -JAVA_INT_MAX - 1 if minimum is None else minimum
    if not _finite(value) or value != int(value) or not low <= value <= JAVA_INT_MAX:
        raise _error(where, f"needs a whole number from {low} to {JAVA_INT_MAX}, got {value!r:.40}")
    return int(value)


def _number(value, where) -> float:
    if not _finite(value):
        raise _error(where, f"needs a number, got {value!r:.40}")
    return float(value)


def _check_weights(weights, where) -> None:
    if any(w < 0 for w in weights) or not sum(weights) > 0:
        raise _error(where, "weights must be non-negative with a positive sum")


def _weighted(rng, weights) -> int:
    """SynthUtils.getWeighted: the first index whose running sum exceeds U(0, total)."""
    u = rng.random() * sum(weights)
    cum = 0.0
    for k, w in enumerate(weights):
        cum += w
        if cum > u:
            return k
    return len(weights) - 1


class _Sample:
    """One ``{val[, std, dist]}`` / ``{discrete[, weights]}`` sample (see the module docstring)."""

    def __init__(self, doc, where):
        self.where = where
        if isinstance(doc, (int, float)) and not isinstance(doc, bool):
            doc = {"val": doc}
        if not isinstance(doc, dict):
            raise _error(where, f"needs a sample such as {{\"val\": 10, \"std\": 2}}, got {doc!r}")
        self.discrete = doc.get("discrete")
        if self.discrete is not None:
            if not isinstance(self.discrete, list) or not self.discrete:
                raise _error(where, "discrete needs a non-empty list")
            self.values = [_number(float(v) if isinstance(v, str) and _is_float(v) else v, where)
                           for v in self.discrete]
            weights = doc.get("weights") or [1.0] * len(self.values)
            if not isinstance(weights, list):
                raise _error(where, "weights needs a list of numbers")
            self.weights = [_number(x, where) for x in weights]
            if len(self.weights) != len(self.values):
                raise _error(where, "discrete and weights differ in length")
            _check_weights(self.weights, where)
            return
        if "val" not in doc:
            raise _error(where, "a sample needs val (and std) or discrete")
        self.val = _number(doc["val"], where)
        self.std = None if doc.get("std") is None else _number(doc["std"], where)
        self.dist = str(doc.get("dist", "LOGNORM")).upper()
        if self.dist not in ("LOGNORM", "NORM"):
            raise _error(where, f"dist is LOGNORM or NORM, got {doc.get('dist')!r}")

    def draw(self, rng) -> float:
        value = self._draw(rng)
        if not math.isfinite(value) or abs(value) > 1e15:
            raise _error(self.where, f"drew {value!r}: the sample's numbers are too large")
        return value

    @property
    def constant(self) -> bool:
        """Every draw gives the same value, taking nothing from the generator."""
        return self.discrete is None and (self.std is None or self.val <= 0)

    def _draw(self, rng) -> float:
        if self.discrete is not None:
            return self.values[_weighted(rng, self.weights)]
        if self.std is None:
            return self.val
        if self.val <= 0:
            return 0.0
        std = self.std or self.val / 6
        if self.dist == "NORM":
            return float(rng.normal(self.val, std))
        ratio = std / self.val                   # not std² / val²: val² underflows to 0 below 1e-162
        sigma2 = math.log1p(ratio * ratio)
        return float(rng.lognormal(math.log(self.val) - sigma2 / 2, math.sqrt(sigma2)))


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class _JobClass:
    def __init__(self, doc, where):
        if not isinstance(doc, dict):
            raise _error(where, "a job class must be an object")
        self.name = str(doc.get("class_name") or "class")
        self.user = str(doc.get("user_name") or "default")
        self.weight = _number(doc.get("class_weight", 0), where)
        self.type = str(doc.get("type") or "mapreduce")
        if "tasks" in doc:
            if not isinstance(doc["tasks"], list):
                raise _error((where[0], f"{where[1]}.tasks"), "needs a list of task definitions")
            defs = doc["tasks"]
            tw = [(where[0], f"{where[1]}.tasks[{k}]") for k in range(len(defs))]
            duration = doc.get("duration", {"val": 0})
        else:                                              # the flat form, as SLS converts it
            f = {k: _number(doc.get(k, 0), (where[0], f"{where[1]}.{k}")) for k in (
                "mtasks_avg", "mtasks_stddev", "rtasks_avg", "rtasks_stddev", "mtime_avg", "mtime_stddev",
                "rtime_avg", "rtime_stddev", "map_max_memory_avg", "map_max_memory_stddev",
                "reduce_max_memory_avg", "reduce_max_memory_stddev", "map_max_vcores_avg",
                "map_max_vcores_stddev", "reduce_max_vcores_avg", "reduce_max_vcores_stddev",
                "dur_avg", "dur_stddev")}
            defs = [{"type": kind, **{field: {"val": f[f"{prefix}_avg"], "std": f[f"{prefix}_stddev"]}
                                      for field, prefix in (("count", f"{p}tasks"), ("time", f"{p}time"),
                                                            ("max_memory", f"{kind}_max_memory"),
                                                            ("max_vcores", f"{kind}_max_vcores"))}}
                    for kind, p in (("map", "m"), ("reduce", "r"))]
            tw = [where] * 2
            duration = {"val": f["dur_avg"], "std": f["dur_stddev"]}
        self.duration = _Sample(duration, (where[0], f"{where[1]}.duration"))
        self.defs = []
        for d, w in zip(defs, tw):
            if not isinstance(d, dict):
                raise _error(w, "a task definition must be an object")
            self.defs.append((str(d.get("type") or "map"),) + tuple(
                _Sample(d.get(k, {"val": default}), (w[0], f"{w[1]}.{k}"))
                for k, default in (("count", 0), ("time", 0), ("max_memory", 0), ("max_vcores", 0))))

    def tasks(self, rng, scale: float, budget: int) -> tuple[list[dict], int]:
        """The job's SLS task objects and how many tasks they are: SynthJob's expansion, or
        one task per stream.

        ``budget`` is how many tasks the spec may still draw (of ``MAX_TASKS``): a count above
        it is refused before its tasks are made.  Tasks that cannot differ (streams, a constant
        time) are one object with SLS's ``count``; drawn tasks of equal time share one object.
        """
        duration_ms = max(self.duration.draw(rng), 0.0) * 1000.0
        out: list[dict] = []
        drawn = 0
        for kind, count, time, memory, vcores in self.defs:
            n = max(int(round(count.draw(rng))), 0)
            if n > budget - drawn:
                raise _error(count.where, f"draws {n:,} tasks, {budget - drawn:,} left of the {MAX_TASKS:,} a "
                                          f"spec may draw in all")
            drawn += n
            demand = {"container.memory-mb": max(round(memory.draw(rng)), MIN_MEMORY_MB),
                      "container.vcores": max(round(vcores.draw(rng)), MIN_VCORES)}
            if n and (self.type == "stream" or time.constant):          # drawing takes nothing from rng
                ms = max(duration_ms if self.type == "stream" else round(time.draw(rng)) * scale, 1.0)
                out.append({"container.type": kind, "container.duration.ms": ms, **demand, "count": n})
                continue
            alike: dict[float, dict] = {}
            for _ in range(n):
                ms = max(round(time.draw(rng)) * scale, 1.0)
                task = alike.get(ms)
                if task is None:
                    task = alike[ms] = {"container.type": kind, "container.duration.ms": ms, **demand}
                out.append(task)
        return out, drawn


class _Workload:
    def __init__(self, doc, where):
        if not isinstance(doc, dict):
            raise _error(where, "a workload must be an object")
        self.weight = _number(doc.get("workload_weight", 0), (where[0], f"{where[1]}.workload_weight"))
        self.queue = str(doc.get("queue_name") or "default")
        classes = doc.get("job_classes")
        if not isinstance(classes, list) or not classes:
            raise _error((where[0], f"{where[1]}.job_classes"), "needs a non-empty list of job classes")
        self.classes = [_JobClass(c, (where[0], f"{where[1]}.job_classes[{k}]")) for k, c in enumerate(classes)]
        self.class_weights = [c.weight for c in self.classes]
        _check_weights(self.class_weights, (where[0], f"{where[1]}.job_classes[*].class_weight"))
        times = doc.get("time_distribution")
        tw = (where[0], f"{where[1]}.time_distribution")
        if not isinstance(times, list) or not times or not all(isinstance(t, dict) for t in times):
            raise _error(tw, "needs a non-empty list of {time, weight}")
        self.times = [_whole(t.get("time", 0), tw) for t in times]
        self.time_weights = [_number(t.get("weight", 0), tw) for t in times]
        _check_weights(self.time_weights, tw)

    def submission(self, rng) -> int:
        """Seconds: a bucket by weight, then uniform whole seconds up to the next bucket's time."""
        k = _weighted(rng, self.time_weights)
        start = self.times[k]
        end = self.times[min(k + 1, len(self.times) - 1)]
        return start + (int(rng.integers(end - start)) if end > start else 0)

    def job_class(self, rng) -> _JobClass:
        return self.classes[_weighted(rng, self.class_weights)]


def _nodes(spec: dict, where) -> list[tuple[str, str]]:
    n = _whole(spec.get("num_nodes", 0), where("num_nodes"))
    if n > MAX_GROUP:
        raise _error(where("num_nodes"), f"at most {MAX_GROUP:,} nodes, got {n:,}")
    per_rack = _whole(spec.get("nodes_per_rack", 1), where("nodes_per_rack"), minimum=None)
    racks = min(max(n // max(per_rack, 1), 1), max(n, 1))
    return [(f"rack{i % racks}", f"node{i}") for i in range(n)]
