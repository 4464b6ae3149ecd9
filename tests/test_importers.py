"""`rayrm trace import`: SWIM, SLS, openb and Google 2011 samples in, rayrm configs out.

The samples under tests/data/ follow the published schemas; every expected number
below is worked by hand from them (the arithmetic is in the comments).  MB = 2^20 B.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rayrm.rm.cli.main import main as rayrm
from rayrm.rm.core.config import load_config
from rayrm.rm.core.constraints import Clause, Constraint
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import NodeSpec, Resources
from rayrm.traces.importers.common import SkipReport, node_groups, token
from rayrm.traces.importers.google2011 import import_google2011
from rayrm.traces.importers.openb import import_openb
from rayrm.traces.importers.queues import queue_tree
from rayrm.traces.importers.sls import import_sls, nm_resource
from rayrm.traces.importers.swim import import_swim, task_model

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).parent.parent
SWIM_SHIPPED = REPO / "traces" / "data" / "swim" / "FB-2009_samples_24_times_1hr_0.tsv"
OPENB = [DATA / "openb" / "openb_node_list_sample.csv", DATA / "openb" / "openb_pod_list_sample.csv"]
GOOGLE = DATA / "google2011"
GK = "GK8dyGk8DkcNqGJ4VvIjHsFzZBxL+I5EDDEb6hScbzg_"   # the hashed attribute name, '=' made '_'


def jobs_by_id(result):
    return {j.job_id: j for j in result.jobs}


def durations(job):
    return list(job.task_durations(seed=1))


# ----- shared pieces ------------------------------------------------------------------

@pytest.mark.parametrize("raw, want", [
    ("V100M32", "V100M32"),
    ("GK8dyGk8DkcNqGJ4VvIjHsFzZBxL+I5EDDEb6hScbzg=", GK),
    ("a b(c)", "a_b_c_"),
    ("x..y", "x._y"),          # '..' would read as a range inside a list
    ("", "_"),
    (5.0, "5"),
])
def test_token(raw, want):
    assert token(raw) == want


@given(st.text(max_size=20), st.lists(st.text(max_size=12), min_size=1, max_size=4))
def test_tokens_round_trip_through_the_constraint_grammar(name, values):
    c = Constraint((Clause(token(name), "==", (token(values[0]),)),
                    Clause(token(name), "in", tuple(token(v) for v in values))))
    assert Constraint.parse(str(c)) == c


def test_strict_check_rows_raises_for_the_lowest_bad_row_not_a_rule():
    rows = np.array([2, 3, 4, 5])
    checks = [(np.array([0, 0, 0, 1], bool), "b", "late"),
              (np.array([1, 0, 0, 0], bool), "x", "left out", "rule"),
              (np.array([0, 0, 1, 0], bool), "a", "early")]
    with pytest.raises(InputError) as e:
        SkipReport("t", strict=True).check_rows(rows, checks, file="f.csv")
    assert str(e.value) == "f.csv:4: field 'a': early"
    report = SkipReport("t")
    good = report.check_rows(rows, checks, file="f.csv")
    assert good.tolist() == [False, True, False, False]
    assert report.reasons() == {"late": 1, "left out": 1, "early": 1}


def test_node_groups_fold_numbered_identical_nodes():
    cap, big = Resources(cpu=8), Resources(cpu=16)
    nodes = [NodeSpec(f"n{i:03d}", cap, {}) for i in (1, 2, 3)] + [NodeSpec("n004", big, {}),
                                                                   NodeSpec("gpu-a", cap, {})]
    groups = node_groups(nodes)
    assert groups[0] == {"name": "n{i:03d}", "capacity": {"cpu": 8}, "count": 3, "start": 1}
    assert [g["name"] for g in groups[1:]] == ["n004", "gpu-a"]


# ----- SWIM ------------------------------------------------------------------------------

def test_swim_task_model_full_split():
    # 640 MB input -> 10 maps of 64 MB: 2 + 64/8 = 10 s; 128 MB shuffle -> 2 reduces of 64 MB,
    # 32 MB output -> 16 MB each: 2 + 64/8 + 16/16 = 11 s.
    maps, reduces, t_map, t_reduce = task_model([640 * 2**20], [128 * 2**20], [32 * 2**20])
    assert (maps[0], reduces[0], t_map[0], t_reduce[0]) == (10, 2, 10.0, 11.0)


def test_swim_sample():
    report = SkipReport("swim")
    result = import_swim([DATA / "swim" / "sample.tsv"], report)
    jobs = jobs_by_id(result)
    assert list(jobs) == ["j1-map", "j1-reduce", "j2-map", "j3-map", "j3-reduce", "j7-map", "j7-reduce"]
    # j1: 128 MB input -> 2 maps of 64 MB, 2 + 64/8 = 10 s, at t=10.
    m = jobs["j1-map"].app
    assert (m.num_tasks, m.submit, m.demand, durations(jobs["j1-map"])) == \
        (2, 10.0, Resources(cpu=1, memory_mb=1024), [10.0, 10.0])
    # 64 MB shuffle -> 1 reduce: 2 + 64/8 + 32 MB/16 = 12 s, submitted one map later: 10 + 10 = 20.
    r = jobs["j1-reduce"].app
    assert (r.num_tasks, r.submit, r.demand, durations(jobs["j1-reduce"])) == \
        (1, 20.0, Resources(cpu=1, memory_mb=2048), [12.0])
    # j2: no shuffle -> map-only; 1000 B in, 16 MB out written by the map:
    # 2 + 1000/(8 MB) + 16/16 = 3.000119 -> 3.0 (ms precision).
    assert durations(jobs["j2-map"]) == [3.0]
    # j3: empty input still has 1 map (2 s); 200 MB shuffle -> ceil(200/64) = 4 reduces of 50 MB:
    # 2 + 50/8 = 8.25 s, submitted at 40 + 2 = 42.
    assert (jobs["j3-map"].app.num_tasks, durations(jobs["j3-map"])) == (1, [2.0])
    assert (jobs["j3-reduce"].app.num_tasks, jobs["j3-reduce"].app.submit) == (4, 42.0)
    assert durations(jobs["j3-reduce"]) == [8.25] * 4
    assert len(result.nodes) == 600 and result.nodes[0].capacity == Resources(cpu=8, memory_mb=16384)
    # j7 has a 7th cell, which is not used (SWIM's input-path files have 9).
    assert report.reasons() == {"not a number": 1, "negative": 1, "job id used before": 1, "missing": 1}
    assert report.notes()["rows with cells after the 6th (e.g. SWIM's input path): those cells are not used"] == 1


def test_swim_input_path_variant():
    # 9 columns: the usual 6, an input path and two empty cells (SWIM's *withInputPaths* files).
    report = SkipReport("swim")
    result = import_swim([DATA / "swim" / "input-paths.tsv"], report)
    jobs = jobs_by_id(result)
    assert list(jobs) == ["job0-map", "job0-reduce", "job1-map", "job2-map"]
    # job0: 128 MB -> 2 maps of 10 s; 64 MB shuffle -> 1 reduce: 2 + 64/8 + 32/16 = 12 s at 0 + 10.
    assert (jobs["job0-map"].app.num_tasks, durations(jobs["job0-map"])) == (2, [10.0, 10.0])
    assert (jobs["job0-reduce"].app.submit, durations(jobs["job0-reduce"])) == (10.0, [12.0])
    # job1: 5 MB, map-only, no output: 2 + 5/8 = 2.625 s; job2: no input, 1 MB out: 2 + 1/16 = 2.0625.
    assert durations(jobs["job1-map"]) == [2.625]
    assert durations(jobs["job2-map"]) == [2.062]
    assert report.skipped == 0


def test_an_import_without_jobs_names_the_rules_and_rows(tmp_path, capsys):
    bad = tmp_path / "bad.tsv"
    bad.write_text("j1\tx\t0\t1\t1\t1\n\t5\t5\t1\t1\t1\n")
    assert rayrm(["trace", "import", "swim", str(bad), "-o", str(tmp_path / "x.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("rayrm trace: error: ") and "yields no usable job" in err
    assert f"bad: 1 x not a number [{bad}: field 'submit'] (rows 1)" in err
    assert f"bad: 1 x empty job id [{bad}: field 'job id'] (rows 2)" in err


def test_swim_refuses_a_job_of_more_tasks_than_any_trace(tmp_path):
    # 700 TB of shuffle at 64 MB a reduce: 700 * 2^40 / 2^26 = 11,468,800 reduces > 10,000,000; the
    # bytes held no allocation here, but a simulation would draw a duration per task.
    tsv = tmp_path / "big.tsv"
    tsv.write_text(f"j1\t0\t0\t100\t100\t100\nj2\t5\t5\t100\t{700 * 2 ** 40}\t100\n")
    with pytest.raises(InputError) as e:
        import_swim([tsv], SkipReport("swim"))
    assert str(e.value) == (f"{tsv}:2: field 'shuffle bytes': at most 10,000,000 tasks per job (64 MB each), "
                            f"got 11,468,800")
    with pytest.raises(InputError) as e:
        import_swim([DATA / "swim" / "sample.tsv"], SkipReport("swim"), nodes=10 ** 12)
    assert str(e.value) == "field '--nodes': at most 1,000,000 nodes, got 1,000,000,000,000"


def test_swim_strict_stops_at_the_first_bad_row():
    with pytest.raises(InputError) as e:
        import_swim([DATA / "swim" / "sample.tsv"], SkipReport("swim", strict=True))
    assert str(e.value).endswith("sample.tsv:4: field 'submit': not a number")


def test_swim_cluster_file(tmp_path):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("cluster:\n  nodes:\n    - {name: 'w{i}', count: 3, capacity: {cpu: 4, memory_mb: 8192},"
                       " attributes: {rack: r1}}\n")
    result = import_swim([DATA / "swim" / "sample.tsv"], SkipReport("swim"), cluster=cluster)
    assert [n.name for n in result.nodes] == ["w1", "w2", "w3"]
    assert result.nodes[0].attributes == {"rack": "r1"}


def test_swim_shipped_sample_with_license():
    assert (SWIM_SHIPPED.parent / "LICENSE").read_text().startswith("\nCopyright (c) 2011, Regents of the Univ")
    report = SkipReport("swim")
    result = import_swim([SWIM_SHIPPED], report)
    jobs = jobs_by_id(result)
    assert report.skipped == 0
    # 5,894 lines; the 1,446 with shuffle bytes also get a reduce job.
    assert len(result.jobs) == 5894 + 1446
    # job0: 740,773 B in -> 1 map: 2 + 740773/8388608 = 2.0883 -> 2.088 s, at t=49;
    # 2,339,561 B shuffle -> 1 reduce: 2 + 2339561/8388608 + 627471/16777216 = 2.3163 -> 2.316 s.
    assert (jobs["job0-map"].app.submit, durations(jobs["job0-map"])) == (49.0, [2.088])
    assert (jobs["job0-reduce"].app.submit, durations(jobs["job0-reduce"])) == (51.088, [2.316])


# ----- SLS --------------------------------------------------------------------------------

def sls(**kw):
    report = SkipReport("sls", strict=kw.pop("strict", False))
    tree = queue_tree(kw.pop("queue_weights", None), kw.pop("queue_file", None), report)
    return import_sls([DATA / "sls" / "jobs.json"], report, queues=tree, **kw), report


def test_sls_nodes_from_the_node_file():
    result, _ = sls(nodes_file=DATA / "sls" / "nodes.json")
    nodes = {n.name: n for n in result.nodes}
    assert nodes["node1"].capacity == Resources(cpu=8, memory_mb=8192)
    assert nodes["node2"].capacity == Resources(cpu=10, memory_mb=10240)      # SLS's NM default
    assert nodes["node3"].capacity == Resources(cpu=16, memory_mb=16384, gpu=4)
    assert nodes["node3"].attributes == {"rack": "rack2", "label.gpu": "yes", "label.ssd": "yes"}
    assert nodes["node1"].attributes == {"rack": "rack1"}


def test_sls_jobs_groups_durations_labels_queues_and_users():
    result, report = sls(nodes_file=DATA / "sls" / "nodes.json", queue_file=DATA / "sls" / "fair-scheduler.xml")
    jobs = jobs_by_id(result)
    assert list(jobs) == ["job_1-map", "job_1-reduce", "job_2", "job_3_1", "job_3_2", "job_5"]
    m = jobs["job_1-map"].app
    # count 2 x (23707 - 6664 ms = 17.043 s), then container.duration.ms 15000.
    assert durations(jobs["job_1-map"]) == [17.043, 17.043, 15.0]
    # gpu is exclusive (ssd is not): a job without a label expression stays off gpu nodes.
    # Jobs keep weight 1 and name their queue and user; the queue's weight is the tree's.
    assert (m.demand, m.weight, m.submit, str(m.constraint), m.queue, m.user) == \
        (Resources(cpu=1, memory_mb=2048), 1.0, 0.0, "label.gpu not exists", "sls_queue_1", "default")
    r = jobs["job_1-reduce"].app
    # The reduce stage is submitted at its first container.start.ms: 30,000 ms.
    assert (r.demand, r.submit, durations(jobs["job_1-reduce"])) == (Resources(cpu=2, memory_mb=4096), 30.0, [20.0])
    g = jobs["job_2"].app
    assert (g.demand, g.weight, g.submit, str(g.constraint), g.queue) == \
        (Resources(cpu=4, memory_mb=4096, gpu=1), 1.0, 105.204, "label.gpu exists", "sls_queue_2")
    assert durations(jobs["job_2"]) == [20.0] * 3                      # legacy duration.ms
    # No job.id, job.count 2: the 3rd job becomes job_3_1 and job_3_2, SLS's default container.
    assert jobs["job_3_2"].app.demand == Resources(cpu=1, memory_mb=1024) and jobs["job_3_2"].app.queue == "sls_queue_3"
    # fair-scheduler.xml: sls_queue_1 0.25 with min 1024 MB + 1 vcore, sls_queue_2 0.25, sls_queue_3 0.5.
    assert result.queues == [{"name": "sls_queue_1", "weight": 0.25, "min": {"memory_mb": 1024, "cpu": 1}},
                             {"name": "sls_queue_2", "weight": 0.25}, {"name": "sls_queue_3", "weight": 0.5}]
    # job_5 keeps its one good task (9 s).
    assert durations(jobs["job_5"]) == [9.0]
    jobs_json = str(DATA / "sls" / "jobs.json")
    assert report.lines()[1:5] == [
        f"  bad: 1 x a task needs a positive duration [{jobs_json}: field 'job.tasks[0].container.end.ms'] (rows 72)",
        f"  bad: 1 x a resource amount must be a non-negative number, not all zero [{jobs_json}: "
        f"field 'job.tasks[1].container.memory-mb'] (rows 72)",
        f"  bad: 1 x a job needs a non-empty job.tasks list [{jobs_json}: field 'job.tasks'] (rows 89)",
        f"  left out: 1 x label expression 'gpu || ssd' uses || (rayrm constraints are conjunctions) "
        f"[{jobs_json}: field 'job.label.expression'] (rows 65)"]


def test_sls_options():
    result, _ = sls(nodes_file=DATA / "sls" / "nodes.json", queue_weights="sls_queue_1=3",
                    shared_labels=True, pin_hosts=True)
    jobs = jobs_by_id(result)
    # --queue-weights alone: a flat tree of the jobs' queues, the named one weighted, the others 1.
    assert result.queues == [{"name": "sls_queue_1", "weight": 3}, {"name": "default"}, {"name": "adhoc"},
                             {"name": "sls_queue_2"}, {"name": "sls_queue_3"}]
    assert jobs["job_1-map"].app.weight == 1.0 and jobs["job_1-map"].app.queue == "sls_queue_1"
    assert str(jobs["job_1-map"].app.constraint) == "node in (node1, node2)"
    assert str(jobs["job_2"].app.constraint) == "label.gpu exists and node in (node4)"


def test_sls_without_a_node_file_uses_the_hosts():
    result, _ = sls()
    assert [(n.name, n.attributes["rack"]) for n in result.nodes] == \
        [("node1", "rack1"), ("node2", "rack1"), ("node3", "rack2"), ("node4", "rack2")]
    assert all(n.capacity == Resources(cpu=10, memory_mb=10240) for n in result.nodes)
    assert jobs_by_id(result)["job_1-map"].app.constraint.is_empty      # no exclusive labels known


def test_sls_strict_and_malformed_json(tmp_path):
    with pytest.raises(InputError) as e:
        sls(strict=True)
    assert str(e.value).endswith("jobs.json:72: field 'job.tasks[0].container.end.ms': a task needs a positive duration")
    bad = tmp_path / "bad.json"
    bad.write_text('{"job.tasks": [{"duration.ms": 5}]}\n{"job.id": oops}\n')
    with pytest.raises(InputError, match=r"bad.json:2: malformed JSON"):
        import_sls([bad], SkipReport("sls"))


def test_sls_json_array(tmp_path):
    arr = tmp_path / "arr.json"
    arr.write_text('[{"job.id": "a", "job.tasks": [{"container.host": "h1", "duration.ms": 1000}]},\n'
                   ' {"job.id": "b", "job.start.ms": 500, "job.tasks": [{"container.host": "h2", "duration.ms": 2000}]}]')
    result = import_sls([arr], SkipReport("sls"))
    assert [(j.job_id, j.app.submit, durations(j)) for j in result.jobs] == [("a", 0.0, [1.0]), ("b", 0.5, [2.0])]



# ----- SLS: Rumen job histories and SYNTH specs -----------------------------------------------

RUMEN = DATA / "sls" / "rumen.json"


def test_rumen_successful_attempts_job_properties_and_hosts():
    report = SkipReport("sls")
    result = import_sls([RUMEN], report)              # auto: told from jobID/mapTasks
    jobs = jobs_by_id(result)
    a, b = "job_1371222054000_0001", "job_1371222054000_0002"
    assert list(jobs) == [f"{a}-map", f"{a}-reduce", b]
    # Times are shifted by the earliest submitTime, 1371222054000 ms.
    # m0 failed on h1, then succeeded on h2 from ...58500 to ...68500: 10 s; m1 15 s on h1.
    # Maps take mapreduce.map.{memory.mb,cpu.vcores} = 2048, 2 from jobProperties.
    m = jobs[f"{a}-map"].app
    assert (m.submit, m.num_tasks, m.demand, durations(jobs[f"{a}-map"])) == \
        (0.0, 2, Resources(cpu=2, memory_mb=2048), [10.0, 15.0])
    # No reduce properties: SLS's default container.  Submitted at its attempt's start,
    # 1371222072000 - 1371222054000 = 18 s; it runs 20 s.
    r = jobs[f"{a}-reduce"].app
    assert (r.submit, r.demand, durations(jobs[f"{a}-reduce"])) == (18.0, Resources(cpu=1, memory_mb=1024), [20.0])
    # Job 2: submitted 10 s after job 1, one 5 s map.
    assert (jobs[b].app.submit, durations(jobs[b])) == (10.0, [5.0])
    # The successful attempts' hosts are the nodes, with SLS's NM default capacity.
    assert [(n.name, n.attributes["rack"]) for n in result.nodes] == [("h2", "rack1"), ("h1", "rack1"),
                                                                        ("h3", "rack2")]
    assert all(n.capacity == Resources(cpu=10, memory_mb=10240) for n in result.nodes)
    # m2 has no attempt, m3 was killed: both left out by rule, on job 1's line (5, after the licence).
    assert report.lines()[1:3] == [
        f"  left out: 1 x a task without attempts [{RUMEN}: field 'mapTasks[2].attempts'] (rows 5)",
        f"  left out: 1 x a task whose attempts all failed or were killed [{RUMEN}: field 'mapTasks[3].attempts'] "
        f"(rows 5)"]
    assert report.notes()["failed, killed or speculative attempts not replayed (the task runs once)"] == 1
    assert report.notes()["setup/cleanup tasks (otherTasks) not replayed"] == 1


def test_rumen_bad_attempt_times_and_strict(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"jobID": "j", "submitTime": 1000, "mapTasks": [\n'
                   ' {"attempts": [{"result": "SUCCESS", "hostName": "/r/h", "startTime": 5000, "finishTime": 4000}]},\n'
                   ' {"attempts": [{"result": "SUCCESS", "hostName": "/r/h", "startTime": 2000, "finishTime": 3000}]}]}\n')
    report = SkipReport("sls")
    result = import_sls([bad], report)
    assert [durations(j) for j in result.jobs] == [[1.0]]
    assert report.reasons() == {"an attempt needs startTime < finishTime (ms)": 1}
    with pytest.raises(InputError) as e:
        import_sls([bad], SkipReport("sls", strict=True))
    assert str(e.value) == f"{bad}:1: field 'mapTasks[0].attempts[0]': an attempt needs startTime < finishTime (ms)"


def test_json_stream_reads_comments_and_trailing_commas_as_hadoop_does(tmp_path):
    from rayrm.traces.importers.reading import json_stream

    path = tmp_path / "c.json"
    path.write_text('/* licence\n   text */\n{"a": "hdfs://nn/x", // a comment\n "b": [1, 2,],\n}\n'
                    '// between\n{"c": "/* not a comment */"}\n')
    # Values keep the line their object starts on in the file (3 and 7).
    assert list(json_stream(path)) == [(3, {"a": "hdfs://nn/x", "b": [1, 2]}), (7, {"c": "/* not a comment */"})]
    path.write_text('{"a": 1}\n/* open\n{"b": 2}\n')
    with pytest.raises(InputError, match=r"c.json:2: malformed JSON"):
        list(json_stream(path))


def test_trace_type_auto_refuses_what_it_cannot_tell(tmp_path):
    odd = tmp_path / "odd.json"
    odd.write_text('\n{"foo": 1}\n')
    with pytest.raises(InputError) as e:
        import_sls([odd], SkipReport("sls"))
    assert str(e.value).startswith(f"{odd}:2: cannot tell the trace type")
    # Forced to SLS, a Rumen file has no job.tasks: no job, and the error says which check.
    with pytest.raises(InputError) as e:
        import_sls([RUMEN], SkipReport("sls"), trace_type="sls")
    assert f"bad: 2 x a job needs a non-empty job.tasks list [{RUMEN}: field 'job.tasks'] (rows 5, 84)" in str(e.value)


def test_synth_generic_form_constant_samples():
    result = import_sls([DATA / "sls" / "synth-generic.json"], SkipReport("sls"))
    jobs = jobs_by_id(result)
    # num_jobs 3, all from the workload of weight 1, named <class>_<n> in submit order;
    # every time bucket [10, 10) is empty, so every job is submitted at 10 s.
    assert list(jobs) == [f"etl_00000{k}-{s}" for k in range(3) for s in ("map", "reduce")]
    for k in range(3):
        m, r = jobs[f"etl_00000{k}-map"], jobs[f"etl_00000{k}-reduce"]
        # 3 maps of 4000 ms, 512 MB raised to SynthJob's 1024 MB minimum, 2 vcores;
        # 1 reduce of 9000 ms, 3072 MB, 1 vcore.
        assert (m.app.submit, m.app.num_tasks, m.app.demand, durations(m)) == \
            (10.0, 3, Resources(cpu=2, memory_mb=1024), [4.0] * 3)
        assert (r.app.submit, r.app.num_tasks, r.app.demand, durations(r)) == \
            (10.0, 1, Resources(cpu=1, memory_mb=3072), [9.0])
    # num_nodes 8, nodes_per_rack 4: 8 // 4 = 2 racks, node i in rack i mod 2.
    assert [(n.name, n.attributes["rack"]) for n in result.nodes] == \
        [(f"node{i}", f"rack{i % 2}") for i in range(8)]
    assert all(n.capacity == Resources(cpu=10, memory_mb=10240) for n in result.nodes)


def test_synth_stream_jobs_hold_their_streams_for_the_job_duration():
    result = import_sls([DATA / "sls" / "synth-stream.json"], SkipReport("sls"),
                        node_capacity=nm_resource("memory_mb=8192,cpu=8"))
    # 2 jobs, each 2 streams of 4096 MB / 4 vcores held for the job's duration, 30 s (the
    # stream's own 60000 ms container time only sets SLS's restarts); bucket [1, 2) -> 1 s.
    assert [(j.job_id, j.app.submit, j.app.num_tasks, j.app.demand, durations(j)) for j in result.jobs] == \
        [(f"stream_1_00000{k}", 1.0, 2, Resources(cpu=4, memory_mb=4096), [30.0, 30.0]) for k in range(2)]
    # --nm-resource memory_mb=8192,cpu=8 on num_nodes 4 nodes in one rack.
    assert [(n.name, n.attributes["rack"], n.capacity) for n in result.nodes] == \
        [(f"node{i}", "rack0", Resources(cpu=8, memory_mb=8192)) for i in range(4)]


def test_synth_flat_form_is_drawn_from_rand_seed(tmp_path):
    path = DATA / "sls" / "synth-flat.json"
    first = import_sls([path], SkipReport("sls"), synth_time_unit="s")
    again = import_sls([path], SkipReport("sls"), synth_time_unit="s")
    assert [(j.job_id, j.app, durations(j)) for j in first.jobs] == [(j.job_id, j.app, durations(j))
                                                                   for j in again.jobs]
    jobs = jobs_by_id(first)
    # 12 jobs, read as SLS reads the flat form: a map and a reduce task definition each.
    assert sorted({jid.rsplit("-", 1)[1] for jid in jobs}) == ["map", "reduce"]
    assert len({jid.rsplit("-", 1)[0] for jid in jobs}) == 12
    for j in first.jobs:
        # Submitted in whole seconds in the one bucket of weight > 0, [1, 60).
        assert j.app.submit == int(j.app.submit) and 1 <= j.app.submit < 60
        # memory avg 1024 / 2048 and vcores 1 / 2, each with std 0.001: they round to the mean.
        kind = j.job_id.rsplit("-", 1)[1]
        assert j.app.demand == (Resources(cpu=1, memory_mb=1024) if kind == "map" else Resources(cpu=2, memory_mb=2048))
        assert all(d >= 1 and d == int(d) for d in durations(j))      # whole seconds (--synth-time-unit s)
    maps = [d for j in first.jobs if j.job_id.endswith("-map") for d in durations(j)]
    reduces = [d for j in first.jobs if j.job_id.endswith("-reduce") for d in durations(j)]
    # Log-normal task times of mean 10 s and 20 s: the sample means fall well inside 10 +- 3, 20 +- 6.
    assert abs(np.mean(maps) - 10) < 3 and abs(np.mean(reduces) - 20) < 6
    # Another seed draws other jobs.
    other = tmp_path / "seed3.json"
    other.write_text(path.read_text().replace('"rand_seed" : 2', '"rand_seed" : 3'))
    drawn = import_sls([other], SkipReport("sls"), synth_time_unit="s")
    assert [durations(j) for j in drawn.jobs] != [durations(j) for j in first.jobs]
    # --synth-seed 3 on the seed-2 spec draws exactly what rand_seed 3 does
    reseeded = import_sls([path], SkipReport("sls"), synth_time_unit="s", synth_seed=3)
    assert [(j.job_id, j.app, durations(j)) for j in reseeded.jobs] == [(j.job_id, j.app, durations(j))
                                                                      for j in drawn.jobs]
    # A negative seed (Java's Random takes any int) draws too, from its 32-bit two's complement;
    # 2**32 - 1 itself is above Java's int range and refused.
    minus = tmp_path / "seed-1.json"
    minus.write_text(path.read_text().replace('"rand_seed" : 2', '"rand_seed" : -1'))
    wrapped = tmp_path / "seed4294967295.json"
    wrapped.write_text(path.read_text().replace('"rand_seed" : 2', f'"rand_seed" : {2 ** 32 - 1}'))
    with pytest.raises(InputError, match="rand_seed"):      # above Java's int range: refused
        import_sls([wrapped], SkipReport("sls"), synth_time_unit="s")
    negative = import_sls([minus], SkipReport("sls"), synth_time_unit="s")
    assert len(negative.jobs) == len(first.jobs) and [durations(j) for j in negative.jobs] != \
        [durations(j) for j in first.jobs]


def test_synth_flat_form_command_simulates_and_checks(tmp_path, capsys):
    from rayrm.rm.runs.check import check_run
    from rayrm.rm.sim.engine import simulate

    config = tmp_path / "flat.yaml"
    assert rayrm(["trace", "import", "sls", str(DATA / "sls" / "synth-flat.json"), "--synth-time-unit", "s",
                  "-o", str(config)]) == 0
    assert "8 nodes, 24 jobs" in capsys.readouterr().out          # 12 jobs, each a map and a reduce app
    cfg = load_config(config)
    summary = simulate(cfg, policy="tsf", out=tmp_path / "run")
    assert summary["tasks"]["finished"] == sum(j.app.num_tasks for j in cfg.jobs)
    assert check_run(tmp_path / "run").ok


def test_synth_spec_errors_name_the_field(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text('{"num_nodes": 2, "num_jobs": 1, "rand_seed": 1, "workloads": [{"workload_weight": 1,'
                    ' "job_classes": [{"class_weight": 1, "tasks": [{"count": {"val": "many"}}]}],'
                    ' "time_distribution": [{"time": 0, "weight": 1}]}]}')
    with pytest.raises(InputError) as e:
        import_sls([spec], SkipReport("sls"))
    assert str(e.value) == f"{spec}: field 'workloads[0].job_classes[0].tasks[0].count': needs a number, got 'many'"


def test_synth_tiny_log_normal_mean_draws_nothing_instead_of_dividing_by_zero(tmp_path):
    # mtasks_avg 1e-229 with stddev 1e-230: sigma² = log(1 + (std / avg)²) = log(1.01); the
    # old form std² / avg² divided 1e-460 by 1e-458, both 0.0 in floats (found by the fuzzer).
    text = (DATA / "sls" / "synth-flat.json").read_text()
    spec = tmp_path / "tiny.json"
    spec.write_text(text.replace('"mtasks_avg" : 5', '"mtasks_avg" : 1e-229')
                    .replace('"mtasks_stddev" : 1', '"mtasks_stddev" : 1e-230'))
    jobs = import_sls([spec], SkipReport("sls"), synth_time_unit="s").jobs
    # every draw of ~1e-229 maps rounds to none: the 12 jobs are their reduces alone
    assert [j.job_id for j in jobs] == [f"class_1_{k:06d}" for k in range(12)]


# ----- openb -------------------------------------------------------------------------------

def test_openb_nodes_and_pods():
    report = SkipReport("openb")
    result = import_openb(OPENB, report)
    nodes = {n.name: n for n in result.nodes}
    assert list(nodes) == ["openb-node-0001", "openb-node-0002", "openb-node-0003", "openb-node-0004"]
    # 96000 millicores = 96 CPUs; memory in MiB; 8 GPUs.
    assert nodes["openb-node-0001"].capacity == Resources(cpu=96, memory_mb=786432, gpu=8)
    assert nodes["openb-node-0003"].attributes == {"gpu_model": "T4"}
    assert nodes["openb-node-0004"].attributes == {} and nodes["openb-node-0004"].capacity["gpu"] == 0
    jobs = jobs_by_id(result)
    assert list(jobs) == ["openb-pod-0001", "openb-pod-0002", "openb-pod-0003", "openb-pod-0004"]
    p1 = jobs["openb-pod-0001"].app
    # 8000 millicores, 1 full GPU; deletion - creation = 1100 - 100 = 1000 s.
    assert (p1.demand, p1.submit, p1.num_tasks, str(p1.constraint)) == \
        (Resources(cpu=8, memory_mb=30000, gpu=1), 100.0, 1, "gpu_model in (V100M32)")
    assert durations(jobs["openb-pod-0001"]) == [1000.0]
    p2 = jobs["openb-pod-0002"].app
    # gpu_milli 500 on 1 GPU -> 0.5 GPU; never deleted -> runs to the trace end, the latest
    # well-formed time (pod 0009's 5000 s): 5000 - 200 = 4800 s.
    assert (p2.demand["gpu"], str(p2.constraint)) == (0.5, "gpu_model in (V100M32, T4)")
    assert durations(jobs["openb-pod-0002"]) == [4800.0]
    assert jobs["openb-pod-0003"].app.constraint.is_empty and jobs["openb-pod-0004"].app.demand["gpu"] == 4
    assert report.reasons() == {"not a number": 2, "pod name used before": 1, "gpu_milli is per GPU: 0..1000": 1,
                                "never scheduled (Pending or no scheduled_time)": 1, "duration is not positive": 1}


def test_openb_options_and_strict(tmp_path):
    result = import_openb(OPENB, SkipReport("openb"), unfinished="skip", start="scheduled")
    jobs = jobs_by_id(result)
    assert "openb-pod-0002" not in jobs
    assert durations(jobs["openb-pod-0001"]) == [995.0]                # 1100 - scheduled 105
    with pytest.raises(InputError) as e:
        import_openb(OPENB, SkipReport("openb", strict=True))
    assert str(e.value).endswith("openb_node_list_sample.csv:6: field 'cpu_milli': not a number")
    # A Pending pod is left out by rule, not bad: strict mode goes on.
    nodes, pods = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    nodes.write_text("".join(OPENB[0].read_text().splitlines(keepends=True)[:5]))
    pods.write_text("".join(OPENB[1].read_text().splitlines(keepends=True)[:6]))   # pods 0001..0005
    report = SkipReport("openb", strict=True)
    assert len(import_openb([pods, nodes], report).jobs) == 4
    assert report.reasons() == {"never scheduled (Pending or no scheduled_time)": 1}


# ----- Google 2011 ---------------------------------------------------------------------------

def test_google_machines_attributes_and_events():
    result = import_google2011([GOOGLE], SkipReport("g"))
    nodes = {n.name: n for n in result.nodes}
    # m4 never has a capacity; m5 joins later; the first machines are ADDed at t = 0.
    assert list(nodes) == ["m1", "m2", "m3"]
    assert nodes["m1"].capacity == Resources(cpu=0.5, memory=0.2493)
    # First values win (m1's later GK = 6 is ignored); an empty value reads "_".
    assert nodes["m1"].attributes == {GK: 5, "platform": "pA", "rs": "Ab3_"}
    assert nodes["m3"].attributes == {GK: 8, "kernel": "_", "platform": "HofLGzk1Or/8Ildj2+Lqv0UGGvY82NLoni8+J/Yy0RU_",
                                      "rs": "Zz9_"}
    assert [(e["time"], e.get("leave") or e["join"]["name"]) for e in result.events] == \
        [(600.0, "m5"), (700.0, "m2"), (800.0, "m2")]
    assert result.events[0]["join"]["capacity"] == {"cpu": 0.25, "memory": 0.1241}


def test_google_jobs_durations_and_constraints():
    report = SkipReport("g")
    jobs = jobs_by_id(import_google2011([GOOGLE], report))
    assert list(jobs) == ["100", "200-1", "200-2", "400"]
    j = jobs["100"].app
    # SCHEDULE 601 -> FINISH 661 = 60 s; 601.5 -> 721.5 = 120 s.
    assert (j.num_tasks, j.submit, j.demand, str(j.constraint)) == \
        (2, 600.0, Resources(cpu=0.0625, memory=0.0311), "rs == Ab3_")
    assert durations(jobs["100"]) == [60.0, 120.0]
    # Job 200's tasks differ in CPU request -> two rayrm jobs.  Task 1 was evicted at 630
    # and rescheduled at 640: its duration runs from the last SCHEDULE, 700 - 640 = 60 s.
    assert (jobs["200-1"].app.demand["cpu"], durations(jobs["200-1"])) == (0.125, [100.0])
    assert (jobs["200-2"].app.demand["cpu"], durations(jobs["200-2"])) == (0.25, [60.0])
    # GREATER_THAN 4 on the hashed attribute, NOT_EQUAL "" -> exists; the LESS_THAN on a hash is bad.
    c = jobs["400"].app.constraint
    assert str(c) == f"{GK} > 4 and kernel exists"
    assert Constraint.parse(str(c)) == c
    assert c.matches("m3", {GK: 8, "kernel": "_"}) and not c.matches("m1", {GK: 5})
    assert report.reasons() == {
        "not a number": 2, "unknown code (expected [0, 1, 2, 3, 4, 5, 6, 7, 8])": 1,
        "LESS_THAN/GREATER_THAN needs a number": 1, "the machine never has CPUs and memory": 1,
        "after the end of the trace window": 1,
        "task never scheduled": 1, "task still running at the end of the trace": 1,
        "task last attempt ended in KILL": 1, "task requests neither CPU nor memory": 1}


def test_google_unfinished_truncate_and_gzip_parts(tmp_path):
    copy = tmp_path / "g"
    shutil.copytree(GOOGLE, copy)
    part = copy / "task_events" / "part-00000-of-00001.csv"
    with open(part, "rb") as src, gzip.open(f"{part}.gz", "wb") as dst:
        dst.write(src.read())
    part.unlink()
    jobs = jobs_by_id(import_google2011([copy], SkipReport("g"), unfinished="truncate"))
    # Job 300: task 0 killed at 650 after SCHEDULE 621 -> 29 s; task 2 still running ->
    # until the last task_events time, 721.5: 721.5 - 621 = 100.5 s.
    assert durations(jobs["300"]) == [29.0, 100.5]


def test_google_strict():
    with pytest.raises(InputError) as e:
        import_google2011([GOOGLE], SkipReport("g", strict=True))
    assert str(e.value).endswith("machine_events/part-00000-of-00001.csv:9: field 'time': not a number")


# ----- the command: configs that load, simulate and check ---------------------------------------

CASES = {
    "swim": ([DATA / "swim" / "sample.tsv"], []),
    "swim-input-paths": ([DATA / "swim" / "input-paths.tsv"], ["--nodes", "4"]),
    "sls": ([DATA / "sls" / "jobs.json"], ["--nodes", str(DATA / "sls" / "nodes.json"),
                                           "--queue-file", str(DATA / "sls" / "fair-scheduler.xml")]),
    "sls-rumen": ([DATA / "sls" / "rumen.json"], []),
    "sls-synth-generic": ([DATA / "sls" / "synth-generic.json"], ["--trace-type", "synth"]),
    "sls-synth-stream": ([DATA / "sls" / "synth-stream.json"], ["--nm-resource", "memory_mb=8192,cpu=8"]),
    "openb": (OPENB, []),
    "google2011": ([GOOGLE], []),
}
TASKS = {"swim": 11, "swim-input-paths": 5, "sls": 10, "openb": 4, "google2011": 5,
         "sls-rumen": 4, "sls-synth-generic": 12, "sls-synth-stream": 4}   # Rumen 2+1+1, SYNTH 3x(3+1), 2x2


@pytest.mark.parametrize("fmt", list(CASES))
def test_import_command_simulate_and_check(fmt, tmp_path, capsys):
    from rayrm.rm.runs.check import check_run
    from rayrm.rm.sim.engine import simulate

    inputs, options = CASES[fmt]
    importer = fmt.split("-")[0]
    config = tmp_path / f"{fmt}.yaml"
    assert rayrm(["trace", "import", importer, *map(str, inputs), "-o", str(config), *options]) == 0
    out, err = capsys.readouterr()
    assert f"{TASKS[fmt]} tasks" in out and err.startswith(f"rayrm trace import {importer}: skipped")
    assert (tmp_path / f"{fmt}.jobs.csv").exists()
    cfg = load_config(config)
    assert sum(j.app.num_tasks for j in cfg.jobs) == TASKS[fmt]
    summary = simulate(cfg, policy="tsf", out=tmp_path / "run")
    assert summary["tasks"]["finished"] == TASKS[fmt]
    assert check_run(tmp_path / "run").ok


def test_shipped_swim_prefix_simulates(tmp_path):
    from rayrm.rm.runs.check import check_run
    from rayrm.rm.sim.engine import simulate

    head = tmp_path / "fb-head.tsv"
    head.write_text("".join(SWIM_SHIPPED.read_text().splitlines(keepends=True)[:300]))
    config = tmp_path / "swim.yaml"
    assert rayrm(["trace", "import", "swim", str(head), "-o", str(config), "--nodes", "50"]) == 0
    cfg = load_config(config)
    summary = simulate(cfg, out=tmp_path / "run")
    assert summary["tasks"]["finished"] == sum(j.app.num_tasks for j in cfg.jobs)
    assert check_run(tmp_path / "run").ok


def test_trace_generate_is_wired_to_the_generator(monkeypatch, capsys):
    from rayrm.traces import generate
    from rayrm.rm.cli.main import build_parser

    args = build_parser().parse_args(["trace", "generate", "google", "-o", "x.yaml"])
    assert args._trace_run is generate.run
    monkeypatch.setitem(__import__("sys").modules, "rayrm.traces.generate", None)    # not written yet
    assert rayrm(["trace", "generate", "google", "-o", "x.yaml"]) == 2
    err = capsys.readouterr().err
    assert err == "rayrm trace generate: error: the generator is not available: traces/generate.py is not there yet\n"


def test_user_errors_are_one_line(tmp_path, capsys):
    assert rayrm(["trace", "import", "openb", str(tmp_path / "nope.csv"), str(OPENB[1]),
                  "-o", str(tmp_path / "x.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope.csv" in err and "Traceback" not in err
    assert rayrm(["trace", "import", "swim", str(DATA / "swim" / "sample.tsv"), "--strict",
                  "-o", str(tmp_path / "x.yaml")]) == 2
    assert capsys.readouterr().err.strip().endswith("sample.tsv:4: field 'submit': not a number")
    assert not (tmp_path / "x.yaml").exists()
