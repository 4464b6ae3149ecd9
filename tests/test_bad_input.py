"""Bad input end to end through the CLI: one line naming file, row and field; exit 2; no traceback.

Every case runs through ``rayrm simulate`` and ``rayrm replay`` (the replay refuses
before it starts Ray).  A job no node can ever run is not an error: it is rejected
with the reason and the rest runs (simulate here; replay in test_replay.py).

The base cluster: n1, n2 <cpu:2; memory_mb:2048; disk=ssd>; job "ok" runs 4 tasks of
<1 cpu, 512 MB> for 2 s.
"""

from __future__ import annotations

import csv

import pytest
import yaml
from samples import BASE, REASONS, REJECTS

from rayrm.rm.cli.main import main
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.faults import check_cluster, parse_fault, parse_faults


def with_job(**fields) -> dict:
    job = dict(BASE["workload"]["jobs"][0], **fields)
    return dict(BASE, workload={"jobs": [job]})


def with_capacity(cpu) -> dict:
    group = dict(BASE["cluster"]["nodes"][0], capacity={"cpu": cpu, "memory_mb": 2048})
    return dict(BASE, cluster={"nodes": [group]})


def run_cli(capsys, *argv) -> tuple[int, list[str]]:
    code = main(list(argv))
    err = capsys.readouterr().err.strip().splitlines()
    assert not any("Traceback" in line for line in err), err
    return code, err


CONFIG_ERRORS = {
    # case: (config document or raw text, what the one line must say)
    "malformed YAML": ("cluster: {nodes: [ {name: a\nworkload: 3\n", ".yaml:2: malformed YAML"),
    "unknown policy": (dict(BASE, policy="lottery"), "field 'policy': unknown policy 'lottery'"),
    "zero capacity": (with_capacity(0), "field 'cluster.nodes[0].capacity.cpu': must be positive, got 0"),
    "negative capacity": (with_capacity(-2), "field 'cluster.nodes[0].capacity.cpu': must not be negative"),
    "negative duration": (with_job(duration=-2), "field 'workload.jobs[0].duration': duration must be non-negative"),
    "unreadable operator": (with_job(constraint="disk >< ssd"),
                            "field 'workload.jobs[0].constraint': cannot read constraint 'disk >< ssd'"),
    "bad fault kind": (dict(BASE, faults=["kill-nm:n1@3", "explode@4"]),
                       "field 'faults[1]': unknown fault kind 'explode'"),
    "fault on no node": (dict(BASE, faults=["kill-nm:n9@3"]), "field 'faults[0]': fault 'kill-nm:n9@3': no node"),
    "unknown run setting": (dict(BASE, run={"seeds": 3}), "field 'run.seeds': unknown setting (known: seed, "),
    "zero time scale": (dict(BASE, run={"time_scale": 0}), "field 'run.time_scale': must be positive, got 0"),
    "fractional expiry": (dict(BASE, run={"nm_expiry": 2.5}),
                          "field 'run.nm_expiry': must be a whole number >= 1, got 2.5"),
    "unknown payload": (dict(BASE, run={"payload": "gpu"}), "field 'run.payload': must be one of sleep, cpu, got 'gpu'"),
}


@pytest.mark.parametrize("command", ["simulate", "replay"])
@pytest.mark.parametrize("case", CONFIG_ERRORS, ids=list(CONFIG_ERRORS))
def test_a_bad_config_is_one_line_naming_file_and_field(tmp_path, capsys, command, case):
    doc, expected = CONFIG_ERRORS[case]
    path = tmp_path / "c.yaml"
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    code, err = run_cli(capsys, command, str(path), "--out", str(tmp_path / "out"))
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"rayrm {command}: error: {path}") and expected in err[0]


@pytest.mark.parametrize("command", ["simulate", "replay"])
@pytest.mark.parametrize("rows, expected", [
    ([["a", "0", "2", "3", "1", "512"], ["b", "0", "two", "3", "1", "512"]], "jobs.csv:3: field 'tasks'"),
    ([["a", "0", "2", "3", "1", "512"], ["b", "0", "2", "-3", "1", "512"]], "jobs.csv:3: field 'duration'"),
    ([["a", "0", "2", "3", "1", "512", "extra"]], "jobs.csv:2: more cells than header columns"),
], ids=["not a number", "negative duration", "ragged row"])
def test_a_bad_job_table_names_its_row_and_field(tmp_path, capsys, command, rows, expected):
    with open(tmp_path / "jobs.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "submit", "tasks", "duration", "demand.cpu", "demand.memory_mb"])
        w.writerows(rows)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(dict(BASE, workload={"file": "jobs.csv"})))
    code, err = run_cli(capsys, command, str(tmp_path / "c.yaml"), "--out", str(tmp_path / "out"))
    assert code == 2 and len(err) == 1 and expected in err[0], err


@pytest.mark.parametrize("command", ["simulate", "replay"])
def test_an_unknown_policy_flag_is_one_line(tmp_path, capsys, command):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(BASE))
    code, err = run_cli(capsys, command, str(tmp_path / "c.yaml"), "--policy", "lottery")
    assert code == 2 and err == [f"rayrm {command}: error: unknown policy 'lottery' (choose from "
                                 f"{err[0].split('(choose from ')[1]}"]


def test_an_unknown_trace_format_is_refused(capsys):
    with pytest.raises(SystemExit) as e:        # argparse: its usage line, then the error
        main(["trace", "import", "parquet", "x", "-o", "y.yaml"])
    assert e.value.code == 2
    assert "invalid choice: 'parquet'" in capsys.readouterr().err


@pytest.mark.parametrize("spec, message", [
    ("kill-nm:n1", "write KIND[:TARGET]@T"),
    ("kill-xx:1@3", "unknown fault kind 'kill-xx'"),
    ("kill-rm:x@3", "kill-rm takes no target"),
    ("kill-am@3", "kill-am needs a APP"),
    ("kill-am:ok@-1", "the time must be >= 0"),
    ("kill-am:ok@soon", "must be a number of trace seconds"),
    ("kill-ray-node:x@3", "index must be a whole number"),
    ("kill-nm:zz@3", "no node named 'zz'"),
    ("kill-am:other@3", "no job named 'other'"),
    ("kill-rm@preempt_warned+1+2", "write kill-rm@preempt_warned[+S]"),
    ("kill-rm@preempt_warned+-1", "the delay after preempt_warned must be >= 0"),
    ("drop:0.1@node_lost", "write drop:P@node_lost[+S]+D"),
])
def test_bad_fault_specs_are_one_line_before_ray_starts(tmp_path, capsys, spec, message):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(BASE))
    code, err = run_cli(capsys, "replay", str(tmp_path / "c.yaml"), "--fault", spec)
    assert code == 2 and len(err) == 1 and message in err[0], err


def test_fault_indexes_are_checked_against_the_cluster():
    nm = parse_faults(["kill-ray-node:1@3"], set(), set())
    with pytest.raises(InputError, match="needs a multi-node Ray cluster"):
        check_cluster(nm, ray_nodes=1, nm_hosts=1)
    with pytest.raises(InputError, match="the driver's node"):
        check_cluster(parse_faults(["kill-ray-node:0@3"], set(), set()), ray_nodes=2, nm_hosts=2)
    with pytest.raises(InputError, match="has 2 nodes"):
        check_cluster(parse_faults(["kill-ray-node:2@3"], set(), set()), ray_nodes=2, nm_hosts=2)
    with pytest.raises(InputError, match="1 NodeManager host"):
        check_cluster(parse_faults(["kill-nm-host:1@3"], set(), set()), ray_nodes=1, nm_hosts=1)
    check_cluster(nm, ray_nodes=2, nm_hosts=2)


def test_fault_specs_read_back():
    assert parse_fault(" kill-nm:n30@60 ") == parse_fault("kill-nm:n30@60")
    f = parse_fault("kill-rm@100.5")
    assert (f.kind, f.target, f.time) == ("kill-rm", "", 100.5)
    assert parse_fault("kill-ray-node:1@30").index == 1




def test_jobs_no_node_can_run_are_rejected_and_the_rest_runs_in_the_simulator(tmp_path, capsys):
    from rayrm.rm.runs.check import check_run
    from rayrm.rm.runs.reader import RunDir
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(REJECTS))
    code, _ = run_cli(capsys, "simulate", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "out"))
    assert code == 0
    jobs = RunDir(tmp_path / "out").jobs.set_index("app")
    assert jobs.at["ok", "status"] == "finished"
    assert {a: jobs.at[a, "reason"] for a in REASONS} == REASONS
    assert (jobs.loc[list(REASONS), "status"] == "rejected").all()
    assert check_run(tmp_path / "out").ok
