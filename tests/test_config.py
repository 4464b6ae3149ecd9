"""Config and job-table loading: the bundled config, and errors that name file, row and field."""

import textwrap

import pytest

import dataclasses

from rayrm.rm.core.config import RunSettings, load_config, parse_config, read_job_table, write_job_table
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.jobs import Durations


def test_paper_micro_is_table_ii():
    cfg = load_config("configs/paper-micro.yaml")
    assert cfg.dims == ("cpu", "memory_mb")
    assert [n.name for n in cfg.nodes][:2] == ["n01", "n02"] and cfg.nodes[-1].name == "n50"
    assert cfg.nodes[24].capacity["cpu"] == 1 and cfg.nodes[25].capacity["cpu"] == 2
    jobs = {j.job_id: j for j in cfg.jobs}
    assert [jobs[j].app.num_tasks for j in ("job1", "job2", "job3", "job4")] == [1000, 150, 100, 100]
    assert [jobs[j].app.submit for j in ("job1", "job2", "job3", "job4")] == [0, 10, 150, 150]
    job3 = jobs["job3"].app.constraint
    assert job3.matches("n10", {}) and job3.matches("n26", {}) and not job3.matches("n11", {})
    # ±20% around 21.3 s: every draw lies in [17.04, 25.56]
    d = jobs["job3"].task_durations(seed=1)
    assert len(d) == 100 and d.min() >= 21.3 * 0.8 and d.max() <= 21.3 * 1.2


def test_durations_depend_only_on_seed_and_job():
    cfg = load_config("configs/paper-micro.yaml")
    a = cfg.jobs[1].task_durations(seed=7)
    b = cfg.jobs[1].task_durations(seed=7)
    c = cfg.jobs[1].task_durations(seed=8)
    assert (a == b).all() and not (a == c).all()


def test_run_settings_are_typed_defaults_overlaid_by_the_config_and_frozen():
    # paper-micro's run: {seed: 1, time_scale: 0.05, heartbeat_interval: 1}; the rest default
    run = load_config("configs/paper-micro.yaml").run
    assert run == RunSettings(seed=1, time_scale=0.05, heartbeat_interval=1.0)
    assert (run.nm_expiry, run.am_expiry, run.max_attempts, run.payload, run.am_hosts) == (10, 10, 2, "sleep", 0)
    assert isinstance(run.heartbeat_interval, float) and isinstance(run.nm_expiry, int)
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.am_hosts = 3
    assert RunSettings.parse(None) == RunSettings()
    assert RunSettings.parse({"rm_restart": 2, "am_hosts": 4}).rm_restart == 2.0


def test_a_bad_run_setting_names_the_file_and_the_field(tmp_path):
    doc = {"cluster": {"nodes": [{"name": "a", "capacity": {"cpu": 1}}]},
           "workload": {"jobs": [{"id": "j", "submit": 0, "tasks": 1, "demand": {"cpu": 1}, "duration": 1}]},
           "run": {"max_attempts": 0}}
    with pytest.raises(InputError, match=r"c.yaml: field 'run.max_attempts': must be a whole number >= 1, got 0"):
        parse_config(doc, tmp_path / "c.yaml")


def write(tmp_path, text, name="c.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


GOOD = """
cluster:
  nodes:
    - {name: "n{i}", count: 2, capacity: {cpu: 2, mem: 4}}
workload:
  jobs:
    - {id: a, tasks: 3, demand: {cpu: 1}, duration: 5}
"""


@pytest.mark.parametrize("edit, message", [
    (("cpu: 2", "cpu: -2"), "field 'cluster.nodes[0].capacity.cpu': must not be negative, got -2"),
    (("tasks: 3", "tasks: 2.5"), "field 'workload.jobs[0].tasks': must be a whole number >= 1, got 2.5"),
    (("duration: 5", "duration: -5"), "field 'workload.jobs[0].duration': duration must be non-negative"),
    (("duration: 5", "duration: {dist: weibull, mean: 3}"), "unknown duration distribution 'weibull'"),
    (("demand: {cpu: 1}", "demand: {cpu: 1}, constraint: 'gpu =~ 1'"),
     "field 'workload.jobs[0].constraint': cannot read constraint"),
    (('"n{i}"', '"n"'), "field 'cluster.nodes[0].name': a group of 2 nodes needs a name pattern"),
    (("workload:", "policy: best\nworkload:"), "field 'policy': unknown policy 'best'"),
])
def test_errors_name_file_and_field(tmp_path, edit, message):
    p = write(tmp_path, GOOD.replace(*edit))
    with pytest.raises(InputError) as e:
        load_config(p)
    assert str(e.value).startswith(str(p))
    assert message in str(e.value)


def test_job_table_repeated_duration_cells(tmp_path):
    """Rows repeating a duration cell read as the same durations; a listed one is still
    checked against each row's task count: '10|12' lists 2 durations, row 4 has 3 tasks."""
    table = tmp_path / "jobs.csv"
    table.write_text("id,submit,tasks,duration,demand.cpu\n"
                     "a,0,1,uniform:30:0.2,1\nb,0,5,uniform:30:0.2,1\nc,0,2,10|12,1\nd,0,3,10|12,1\n")
    with pytest.raises(InputError) as e:
        read_job_table(table)
    assert str(e.value) == f"{table}:5: field 'duration': 2 durations listed for 3 tasks"
    table.write_text("\n".join(table.read_text().splitlines()[:4]) + "\n")
    a, b, c = read_job_table(table)
    assert a.durations == b.durations == Durations("uniform", mean=30.0, jitter=0.2)
    assert c.durations == Durations("list", values=(10.0, 12.0))


def test_malformed_yaml_names_the_line(tmp_path):
    p = write(tmp_path, "cluster:\n  nodes: [\n")
    with pytest.raises(InputError) as e:
        load_config(p)
    assert str(e.value).startswith(f"{p}:3: malformed YAML")


def test_job_table_round_trip_and_row_errors(tmp_path):
    cfg = load_config(write(tmp_path, GOOD))
    table = tmp_path / "jobs.csv"
    write_job_table(table, cfg.jobs, cfg.dims)
    again = read_job_table(table)
    assert [j.app for j in again] == [j.app for j in cfg.jobs]
    lines = table.read_text().splitlines()
    lines.append("b,1,2,1,,uniform:3:2,1,1")   # jitter 2 > 1
    table.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as e:
        read_job_table(table)
    assert str(e.value).startswith(f"{table}:3: field 'duration'")
