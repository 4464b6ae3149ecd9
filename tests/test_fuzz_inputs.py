"""Fuzzing the loaders: every input either loads or raises InputError — never anything else.

docs/design.md principle 5: bad input gets one clear line naming the file, row and field.
Hypothesis feeds rm.config.parse_config random YAML-shaped trees and mutations of a
valid config, load_config random bytes and YAML-ish text, read_job_table random
CSVs, and Constraint.parse random strings.  The budget is 200 examples per test
(``RAYRM_FUZZ_EXAMPLES`` raises it).
"""

from __future__ import annotations

import copy
import csv
import importlib.util
import io
import os
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rayrm.rm.cli.main import main
from rayrm.rm.core.config import ExperimentConfig, load_config, parse_config, read_job_table
from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.errors import InputError

# RAYRM_FUZZ_EXAMPLES=5000 for a deeper search than CI's.
FUZZ = settings(max_examples=int(os.environ.get("RAYRM_FUZZ_EXAMPLES", 200)), deadline=None,
                suppress_health_check=[HealthCheck.too_slow])

KEYS = ["name", "resources", "cluster", "nodes", "capacity", "attributes", "count", "start", "events",
        "time", "join", "leave", "workload", "jobs", "file", "id", "tasks", "demand", "duration", "dist",
        "mean", "jitter", "sigma", "alpha", "submit", "weight", "constraint", "policy", "run", "seed",
        "time_scale", "heartbeat_interval", "faults", "cpu", "memory_mb", "description"]
# Text that means something to the loaders: name patterns, durations, constraints, YAML oddities.
WORDS = ["n{i:02d}", "{i}", "{i[0]}", "{i.x}", "{0}", "{i:s}", "{", "}", "tsf", "drf", "fifo",
         "cpu:1;memory_mb:512", "cpu:x", "pareto:1.9:30", "pareto:0.5:30", "uniform:10:2", "lognormal:5:1",
         "exponential:-1", "10|12|9", "1|", "nan", "inf", "-0", "1e400", "disk == ssd", "node in (n01..n03)",
         "cores > x", "a in ()", "2001-02-30", "0x1F", "~", "yes", "on", ".inf", "*", "&a", "!!python/none"]
scalars = (st.none() | st.booleans() | st.integers() | st.integers(-3, 3)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12) | st.sampled_from(WORDS))
keys = st.sampled_from(KEYS) | st.text(max_size=8) | st.integers(-2, 2) | st.booleans()
trees = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(keys, inner, max_size=5), max_leaves=25)

VALID = {
    "name": "fuzz",
    "cluster": {"nodes": [{"name": "n{i:02d}", "count": 3, "capacity": {"cpu": 2, "memory_mb": 1024},
                           "attributes": {"disk": "ssd", "cores": 8}},
                          {"name": "big", "capacity": "cpu:8;memory_mb:8192"}],
                "events": [{"time": 5, "leave": "n01"},
                           {"time": 9, "join": {"name": "x1", "capacity": {"cpu": 1, "memory_mb": 512}}}]},
    "workload": {"jobs": [{"id": "j1", "submit": 0, "tasks": 2, "demand": {"cpu": 1},
                           "duration": {"mean": 10, "jitter": 0.2}, "constraint": "disk == ssd"},
                          {"id": "j2", "tasks": 3, "demand": "cpu:1;memory_mb:512", "duration": [1, 2, 3],
                           "weight": 2, "constraint": "node in (n01..n03) and cores >= 4"},
                          {"id": "j3", "tasks": 1, "demand": {"cpu": 1},
                           "duration": {"dist": "pareto", "alpha": 1.9, "mean": 30}}]},
    "policy": "tsf",
    "run": {"seed": 3, "time_scale": 0.5},
}


def loads_or_input_error(fn, *args):
    """Call fn; an InputError is fine (its message must be one line), anything else fails."""
    try:
        return fn(*args)
    except InputError as e:
        assert "\n" not in str(e).strip(), str(e)
        return e


def test_the_valid_config_is_valid():
    cfg = parse_config(copy.deepcopy(VALID))
    assert isinstance(cfg, ExperimentConfig)
    assert [n.name for n in cfg.nodes] == ["n01", "n02", "n03", "big"]
    assert [j.app.num_tasks for j in cfg.jobs] == [2, 3, 1]


@FUZZ
@given(trees)
def test_parse_config_random_trees(doc):
    with tempfile.TemporaryDirectory() as d:      # 'workload.file' resolves in an empty directory
        loads_or_input_error(parse_config, doc, Path(d) / "c.yaml")


def _mutate(doc, data) -> None:
    """Replace, delete or add one entry somewhere in ``doc`` (a dict or list tree)."""
    node = doc
    while True:
        items = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
        deeper = [(k, v) for k, v in items if isinstance(v, (dict, list)) and v]
        if not deeper or data.draw(st.booleans()):
            break
        node = data.draw(st.sampled_from(deeper))[1]
    items = list(node.keys()) if isinstance(node, dict) else list(range(len(node)))
    action = data.draw(st.sampled_from(["replace", "delete", "add"] if items else ["add"]))
    if action == "add":
        value = data.draw(trees)
        if isinstance(node, dict):
            node[data.draw(keys)] = value
        else:
            node.append(value)
        return
    key = data.draw(st.sampled_from(items))
    if action == "delete":
        del node[key]
    else:
        node[key] = data.draw(trees)


@FUZZ
@given(st.data())
def test_parse_config_mutated_valid_configs(data):
    doc = copy.deepcopy(VALID)
    for _ in range(data.draw(st.integers(1, 3))):
        _mutate(doc, data)
    with tempfile.TemporaryDirectory() as d:
        loads_or_input_error(parse_config, doc, Path(d) / "c.yaml")


yaml_text = (st.builds(lambda t: yaml.safe_dump(t, allow_unicode=True), trees)
             | st.lists(st.sampled_from(WORDS + KEYS + [": ", "\n", "  ", "- ", "[", "]", "{", "}", ",",
                                                           "'", '"', "#", "\t", "%YAML 1.1\n", "---\n", "? "]),
                        max_size=30).map("".join)
             | st.text(max_size=200))


@FUZZ
@given(st.binary(max_size=300) | yaml_text.map(lambda s: s.encode("utf-8", "surrogatepass")))
def test_load_config_random_files(content):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "c.yaml"
        path.write_bytes(content)
        result = loads_or_input_error(load_config, path)
        if isinstance(result, InputError):
            assert str(path) in str(result)           # the message names the file


COLUMNS = ["id", "submit", "tasks", "weight", "constraint", "duration", "demand.cpu", "demand.memory_mb",
           "demand.", "demand.gpu"]
cells = (st.sampled_from(["", "0", "1", "2", "-1", "1.5", "1e400", "nan", "abc", "3|4", "pareto:1.9:30",
                          "uniform:10:0.2", "uniform:10:5", "disk == ssd", "a in (x", "j1"])
         | st.integers().map(str) | st.floats().map(str) | st.text(max_size=8))


@FUZZ
@given(st.lists(st.sampled_from(COLUMNS) | st.text(max_size=6), max_size=9),
       st.lists(st.lists(cells, max_size=10), max_size=6))
def test_read_job_table_random_rows(header, rows):
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(header)
    writer.writerows(rows)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "jobs.csv"
        path.write_text(buf.getvalue())
        result = loads_or_input_error(read_job_table, path)
        if isinstance(result, InputError):
            assert str(path) in str(result)


@FUZZ
@given(st.binary(max_size=300)
       | st.lists(st.sampled_from(list('ab1.:|,"\n\r\x00 -') + ["id", "tasks", "duration", "demand.cpu"]),
                  max_size=60).map(lambda parts: "".join(parts).encode()))
def test_read_job_table_random_bytes(content):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "jobs.csv"
        path.write_bytes(content)
        loads_or_input_error(read_job_table, path)


constraint_text = (st.text(max_size=40)
                   | st.lists(st.sampled_from(["a", "node", "disk", "==", "!=", "<", ">=", "in", "not", "exists",
                                               "and", "(", ")", ",", "n01..n03", "n3..n1", "x..y", "..", "'q'",
                                               '"', "1.5", "-2", " "]), max_size=12).map(" ".join))


@FUZZ
@given(constraint_text)
def test_constraint_parse_random_strings(text):
    result = loads_or_input_error(Constraint.parse, text)
    if isinstance(result, Constraint):
        # What parses prints back to an expression that parses to the same constraint.
        assert Constraint.parse(str(result)) == result


# ----- what the fuzzer (and a targeted search) found: each was a traceback or a hang ------

J, N = ("workload", "jobs", 0), ("cluster", "nodes", 0)
FOUND = [
    # (where in VALID, value, what the one-line error says)
    ((), {0: None}, "unknown key(s) 0"),                                  # sorted() of int and str keys
    ((), {"\n0": None}, "unknown key(s) \\n0"),                          # a newline stays on one line
    (("workload", "jobs"), True, "field 'workload.jobs': must be a list, got bool"),
    (("faults",), 3, "field 'faults': must be a list, got int"),
    (("cluster", "events"), 5, "field 'cluster.events': must be a list, got int"),
    (J + ("tasks",), 10 ** 400, "field 'workload.jobs[0].tasks': must be a number"),      # OverflowError
    (J + ("duration",), {"mean": 10 ** 400, "jitter": 0.1}, "duration mean must be a number"),
    (N + ("capacity",), {"cpu": 10 ** 400}, "field 'cluster.nodes[0].capacity.cpu': must be a number"),
    (N + ("count",), 10 ** 9, "at most 1,000,000 nodes per group"),                      # was a hang
    (N + ("name",), "n{i[0]}", "bad name pattern 'n{i[0]}'"),                              # TypeError
    (N + ("name",), "n{i.x}", "bad name pattern 'n{i.x}'"),                                # AttributeError
    (N + ("name",), "n{i:1000000000}", "bad name pattern"),                                # 1 GB per name
    (J + ("constraint",), "node in (n1..n999999999999)", "names more than 100,000 nodes"),  # was a hang
    (J + ("tasks",), 10 ** 12, "field 'workload.jobs[0].tasks': at most 10,000,000 tasks per job"),
    (N + ("name",), "n{i:999}", "field 'cluster.nodes[0].name': names of at most 255 characters, got 1000"),
]


@pytest.mark.parametrize("where,value,message", FOUND, ids=[str(f[2])[:40] for f in FOUND])
def test_found_inputs_are_input_errors(where, value, message):
    doc = copy.deepcopy(VALID)
    if where:
        node = doc
        for k in where[:-1]:
            node = node[k]
        node[where[-1]] = value
    else:
        doc = value
    with pytest.raises(InputError) as e:
        parse_config(doc)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_found_cluster_over_the_node_bound_in_all(monkeypatch):
    import rayrm.rm.core.config as config

    # With the bound at 4 nodes: 3 (n01..n03) + 1 (big) = 4 pass; a third group of 1 makes 5.
    monkeypatch.setattr(config, "MAX_GROUP", 4)
    doc = copy.deepcopy(VALID)
    assert len(parse_config(doc).nodes) == 4
    doc["cluster"]["nodes"].append({"name": "x", "capacity": {"cpu": 1}})
    with pytest.raises(InputError) as e:
        parse_config(doc)
    assert str(e.value) == "field 'cluster.nodes[2]': at most 4 nodes in all, got 5 by this group"
    # Events: a leave and a join of 1, then a join of 3 makes 5 events.
    doc = copy.deepcopy(VALID)
    doc["cluster"]["events"].append({"time": 11, "join": {"name": "y{i}", "count": 3, "capacity": {"cpu": 1}}})
    with pytest.raises(InputError) as e:
        parse_config(doc)
    assert str(e.value) == "field 'cluster.events[2].join': at most 4 node events in all"


@pytest.mark.parametrize("content,message", [
    (b"2001-02-30", "malformed YAML: day is out of range for month"),    # PyYAML's ValueError
    (b"name: caf\xe9\n", "cannot read config: not UTF-8 text (byte 10)"),  # UnicodeDecodeError
])
def test_found_files_are_input_errors(tmp_path, content, message):
    (tmp_path / "c.yaml").write_bytes(content)
    with pytest.raises(InputError) as e:
        load_config(tmp_path / "c.yaml")
    assert str(e.value) == f"{tmp_path / 'c.yaml'}: {message}"


def test_found_job_table_bytes_are_input_errors(tmp_path):
    (tmp_path / "jobs.csv").write_bytes(b"id,tasks,duration,demand.cpu\nj\xff,1,1,1\n")
    with pytest.raises(InputError, match="jobs.csv: cannot read job table: not UTF-8 text"):
        read_job_table(tmp_path / "jobs.csv")



# ----- SLS inputs: SLS JSON, Rumen, SYNTH -------------------------------------------------

SLS_DATA = Path(__file__).parent / "data" / "sls"
SLS_SAMPLES = ["rumen.json", "synth-generic.json", "synth-stream.json", "synth-flat.json", "jobs.json"]


def _import_sls(path, trace_type):
    from rayrm.traces.importers.common import SkipReport
    from rayrm.traces.importers.sls import import_sls

    return import_sls([path], SkipReport("fuzz"), trace_type=trace_type)


@FUZZ
@given(st.lists(trees, min_size=1, max_size=3), st.sampled_from(["auto", "rumen", "sls", "synth"]))
def test_sls_importer_random_json(values, trace_type):
    import json

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.json"
        path.write_text("\n".join(json.dumps(v) for v in values))
        loads_or_input_error(_import_sls, path, trace_type)


def _leaves(doc, path=()):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(doc, list):
        for k, v in enumerate(doc):
            yield from _leaves(v, path + (k,))
    yield path


@FUZZ
@given(st.sampled_from(SLS_SAMPLES), st.data())
def test_sls_importer_mutated_samples(name, data):
    """One value anywhere in a real sample replaced by a random tree."""
    import json

    from rayrm.traces.importers.reading import json_stream

    values = [v for _, v in json_stream(SLS_DATA / name)]
    k = data.draw(st.integers(0, len(values) - 1))
    spots = list(_leaves(values[k]))
    spot = data.draw(st.sampled_from(spots))
    if not spot:
        values[k] = data.draw(trees)
    else:
        parent = values[k]
        for part in spot[:-1]:
            parent = parent[part]
        parent[spot[-1]] = data.draw(trees)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / name
        path.write_text("\n".join(json.dumps(v) for v in values))
        loads_or_input_error(_import_sls, path, "auto")


# Sizes one number asks for, found by the fuzzer and a sweep of every number in the samples:
# each was refused only after it was built (a num.nodes of 2.9e15 took the CI to 24 GB).
# (sample, value index, where in it, value, the one-line error after "<file>:<line>: ")
SLS_FOUND = [
    ("jobs.json", 0, ("num.nodes",), 2916107248196456,               # the fuzzer's shrunk input
     "field 'num.nodes': at most 1,000,000 nodes, got 2,916,107,248,196,456"),
    ("jobs.json", 1, ("job.tasks", 0, "count"), 10 ** 12,
     "field 'job.tasks[0].count': at most 10,000,000 tasks per job, got 1,000,000,000,000"),
    # job_1's tasks[0] has count 2 and tasks[1] count 1: 2 + 9,999,999 = 10,000,001 > 10 M.
    ("jobs.json", 1, ("job.tasks", 1, "count"), 9_999_999,
     "field 'job.tasks[1].count': at most 10,000,000 tasks per job, got 10,000,001"),
    ("jobs.json", 3, ("job.count",), 10 ** 12,
     "field 'job.count': at most 100,000 copies of a job, got 1,000,000,000,000"),
    ("jobs.json", 1, ("job.count",), 100_001,
     "field 'job.count': at most 100,000 copies of a job, got 100,001"),
    ("synth-generic.json", 0, ("num_jobs",), 2 ** 31 - 1,
     "field 'num_jobs': at most 100,000 jobs, got 2,147,483,647"),
    ("synth-generic.json", 0, ("num_jobs",), 10 ** 400,                # math.isfinite overflowed
     "field 'num_jobs': needs a whole number from 0 to 2147483647, got " + "1" + "0" * 39),
    ("synth-generic.json", 0, ("num_nodes",), 2 ** 31 - 1,
     "field 'num_nodes': at most 1,000,000 nodes, got 2,147,483,647"),
    ("synth-generic.json", 0, ("workloads", 0, "job_classes", 0, "tasks", 0, "count"), {"val": 10 ** 12},
     "field 'workloads[0].job_classes[0].tasks[0].count': draws 1,000,000,000,000 tasks, 10,000,000 left "
     "of the 10,000,000 a spec may draw in all"),
]


@pytest.mark.parametrize("name,k,where,value,message", SLS_FOUND, ids=[".".join(map(str, f[2])) for f in SLS_FOUND])
def test_sls_found_sizes_are_input_errors(tmp_path, name, k, where, value, message):
    import json

    from rayrm.traces.importers.reading import json_stream

    lines_values = list(json_stream(SLS_DATA / name))
    node = lines_values[k][1]
    for part in where[:-1]:
        node = node[part]
    node[where[-1]] = value
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(v, indent=1) for _, v in lines_values))
    with pytest.raises(InputError) as e:
        _import_sls(path, "auto")
    line = 1 + sum(json.dumps(v, indent=1).count("\n") + 1 for _, v in lines_values[:k])
    where_in_file = f"{path}:{line}" if name == "jobs.json" else str(path)   # a SYNTH spec has one value
    assert str(e.value) == f"{where_in_file}: {message}"


def test_sls_copies_holding_too_many_tasks(tmp_path):
    # 2,000 tasks x 100,000 copies = 200,000,000 tasks, past the 100,000,000 a job's copies may hold.
    path = tmp_path / "jobs.json"
    path.write_text('{"job.count": 100000, "job.tasks": [{"count": 2000, "container.host": "/r/h",'
                    ' "container.duration.ms": 1000}]}')
    with pytest.raises(InputError) as e:
        _import_sls(path, "sls")
    assert str(e.value) == (f"{path}:1: field 'job.count': at most 100,000,000 tasks in a job's copies "
                            f"(2,000 tasks x job.count), got 200,000,000")


def test_sls_copies_share_their_durations(tmp_path):
    # 3 copies of a job of 2 tasks: job_a_1..3, each 2 tasks of 1 s; the durations tuple is built once.
    path = tmp_path / "jobs.json"
    path.write_text('{"job.id": "a", "job.count": 3, "job.tasks": [{"count": 2, "container.host": "/r/h",'
                    ' "container.duration.ms": 1000}]}')
    jobs = _import_sls(path, "sls").jobs
    assert [(j.job_id, j.app.num_tasks, j.durations.values) for j in jobs] == \
        [(f"a_{c}", 2, (1.0, 1.0)) for c in (1, 2, 3)]
    assert jobs[0].durations.values is jobs[2].durations.values


def test_sls_a_number_too_long_for_python_is_malformed_json(tmp_path):
    # Python reads at most 4,300 digits into an int (sys.int_max_str_digits): json raised ValueError.
    path = tmp_path / "jobs.json"
    path.write_text('{"num.nodes": 2}\n{"job.tasks": [{"count": ' + "1" * 5000 + '}]}')
    with pytest.raises(InputError) as e:
        _import_sls(path, "auto")
    assert str(e.value) == f"{path}:2: malformed JSON: a number too long"


def test_sls_an_integer_too_large_for_a_float_is_a_bad_amount(tmp_path):
    from rayrm.traces.importers.common import SkipReport
    from rayrm.traces.importers.sls import import_sls

    # float(10 ** 400) raises OverflowError: the task is skipped as a bad amount, the other kept.
    path = tmp_path / "jobs.json"
    path.write_text('{"job.tasks": [{"container.host": "/r/h", "container.duration.ms": 1000, '
                    '"container.vcores": 1' + "0" * 400 + '}, {"container.host": "/r/h", '
                    '"container.duration.ms": 2000}]}')
    report = SkipReport("sls")
    result = import_sls([path], report)
    assert [j.durations.values for j in result.jobs] == [(2.0,)]
    assert report.reasons() == {"a resource amount must be a non-negative number, not all zero": 1}


# ----- the CLI: one line on stderr, exit status 2 ------------------------------------

CONFIG_COMMANDS = [c for c in ("simulate", "replay") if importlib.util.find_spec(f"rayrm.rm.cli.{c}")]


@pytest.fixture
def config_command():
    assert CONFIG_COMMANDS, "no command that reads a CONFIG is installed"
    return CONFIG_COMMANDS[0]


BAD_FILES = {
    "malformed YAML": ("bad.yaml", b"cluster: [nodes\n", "bad.yaml:2: malformed YAML"),
    "not UTF-8": ("latin.yaml", b"name: caf\xe9\n", "latin.yaml"),
    "bad capacity": ("cap.yaml", yaml.safe_dump({**VALID, "cluster": {"nodes": [
        {"name": "a", "capacity": {"cpu": -2}}]}}).encode(), "field 'cluster.nodes[0].capacity.cpu'"),
    "unknown policy": ("pol.yaml", yaml.safe_dump({**VALID, "policy": "lottery"}).encode(),
                       "unknown policy 'lottery'"),
}


@pytest.mark.parametrize("case", BAD_FILES, ids=list(BAD_FILES))
def test_cli_bad_config_is_one_line(tmp_path, capsys, config_command, case):
    name, content, expected = BAD_FILES[case]
    path = tmp_path / name
    path.write_bytes(content)
    assert main([config_command, str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"rayrm {config_command}: error: {path}") and expected in err[0]


def test_cli_bad_job_table_names_row_and_field(tmp_path, capsys, config_command):
    (tmp_path / "jobs.csv").write_text("id,tasks,duration,demand.cpu\nj1,2,10,1\nj2,three,10,1\n")
    doc = {k: v for k, v in VALID.items() if k != "workload"} | {"workload": {"file": "jobs.csv"}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(doc))
    assert main([config_command, str(tmp_path / "c.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert f"{tmp_path / 'jobs.csv'}:3: field 'tasks': must be a number, got 'three'" in err[0]


def test_cli_missing_config(tmp_path, capsys, config_command):
    assert main([config_command, str(tmp_path / "nope.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope.yaml: cannot read config" in err[0]
