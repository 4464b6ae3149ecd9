"""The queue tree in a config: the schema as written, and bad input as one line naming the field."""

import textwrap

import pytest

from rayrm.rm.cli.main import main
from rayrm.rm.core.config import load_config, parse_config
from rayrm.rm.core.errors import InputError

CLUSTER = {"nodes": [{"name": "n{i}", "count": 10, "capacity": {"cpu": 4, "memory_mb": 8192}}]}
JOB = {"id": "j1", "tasks": 1, "demand": {"cpu": 1}, "duration": 1}

SCHEMA = textwrap.dedent("""\
    policy: tsf
    cluster:
      nodes: [{name: "n{i}", count: 10, capacity: {cpu: 4, memory_mb: 8192}}]
    queues:
      - name: eng
        weight: 2
        children:
          - {name: batch, weight: 1, max: {cpu: 60%}}
          - {name: adhoc, weight: 1, min: {cpu: 10, memory_mb: 40960}, max_apps: 20}
      - name: research
        weight: 1
        policy: drf
        user_limit: 0.5
        preemption: {min_share_timeout: 30, fair_share_threshold: 0.5}
    workload:
      jobs:
        - {id: j1, queue: eng.batch, user: alice, tasks: 1, demand: {cpu: 1}, duration: 1}
        - {id: j2, queue: root.research, tasks: 1, demand: {cpu: 1}, duration: 1}
        - {id: j3, tasks: 1, demand: {cpu: 1}, duration: 1}
    """)


def test_the_schema_as_written(tmp_path):
    path = tmp_path / "q.yaml"
    path.write_text(SCHEMA)
    cfg = load_config(path)
    tree = cfg.queues
    assert not tree.flat
    assert [q.full_name for q in tree.queues()] == [
        "root", "root.eng", "root.eng.batch", "root.eng.adhoc", "root.research"]
    batch, adhoc, research = (tree.by_path[p] for p in ("eng.batch", "eng.adhoc", "research"))
    assert tree.by_path["eng"].weight == 2 and not tree.by_path["eng"].is_leaf
    assert str(dict(batch.max)["cpu"]) == "60%"
    assert dict(adhoc.min)["memory_mb"].value == 40960 and adhoc.max_apps == 20
    assert research.policy == "drf" and research.user_limit == 0.5
    assert dict(research.preemption) == {"min_share_timeout": 30, "fair_share_threshold": 0.5}
    # "root." is optional in a job's queue; no queue is "default", no user is "default"
    apps = {j.job_id: j.app for j in cfg.jobs}
    assert (apps["j1"].queue, apps["j1"].user) == ("eng.batch", "alice")
    assert (apps["j2"].queue, apps["j3"].queue, apps["j3"].user) == ("research", "default", "default")
    # a job's leaf, or why not
    assert tree.leaf("root.eng.adhoc")[0] is adhoc
    assert tree.leaf("eng") == (None, "queue root.eng is a parent queue (jobs go to leaf queues)")
    assert tree.leaf("default") == (None, "queue root.default does not exist")


def test_no_queues_is_one_leaf_root_default():
    cfg = parse_config({"cluster": CLUSTER, "workload": {"jobs": [JOB]}})
    assert cfg.queues.flat and [q.full_name for q in cfg.queues.queues()] == ["root", "root.default"]


def test_capacity_means_weight_and_min_unless_given():
    from rayrm.rm.core.queues.tree import resolve_bounds
    cfg = parse_config({"cluster": CLUSTER, "workload": {"jobs": [JOB]},
                        "queues": [{"name": "a", "capacity": 70, "max_capacity": 90},
                                   {"name": "b", "capacity": 30, "weight": 5}]})
    a, b = cfg.queues.by_path["a"], cfg.queues.by_path["b"]
    assert (a.weight, b.weight) == (70, 5)
    # a: min 70% of 40 cpu = 28, of 81920 MB = 57344; max 90%: 36 cpu
    lo, hi = resolve_bounds(a, {"cpu": 40, "memory_mb": 81920}, 0.7, 0.9)
    assert lo == pytest.approx({"cpu": 28, "memory_mb": 57344}) and hi["cpu"] == pytest.approx(36)


def _error(queues) -> str:
    with pytest.raises(InputError) as e:
        parse_config({"cluster": CLUSTER, "workload": {"jobs": [JOB]}, "queues": queues}, None)
    return str(e.value)


@pytest.mark.parametrize("queues, message", [
    ([{"name": "a"}, {"name": "a"}], "field 'queues[1].name': queue name 'a' is used twice among siblings"),
    ([{"name": "a", "weight": 0}], "field 'queues[0].weight': must be positive, got 0"),
    ([{"name": "a", "weight": "heavy"}], "field 'queues[0].weight': must be a number, got 'heavy'"),
    ([{"name": "a", "weight": -1}], "field 'queues[0].weight': must be positive, got -1"),
    ([{"name": "a", "min": {"cpu": 30}, "max": {"cpu": "50%"}}],
     "field 'queues[0].min.cpu': min 30 is above max 20"),          # 50% of 40 cpu = 20
    ([{"name": "a", "capacity": 60}, {"name": "b", "capacity": 30}],
     "field 'queues[*].capacity': sibling capacities must sum to 100, got 60 + 30"),
    ([{"name": "a", "max": {"cpu": "150%"}}], "field 'queues[0].max.cpu': a percentage is at most 100, got 150"),
    ([{"name": "a", "max_capacity": 101}], "field 'queues[0].max_capacity': a percentage is at most 100, got 101"),
    ([{"name": "a", "user_limit": 1.5}], "field 'queues[0].user_limit': must be in (0, 1], got 1.5"),
    ([{"name": "a", "max_apps": 0}], "field 'queues[0].max_apps': must be a whole number >= 1, got 0"),
    ([{"name": "a.b"}], "field 'queues[0].name': a queue name is letters, digits, '_' and '-', got 'a.b'"),
    ([{"name": "a", "max": {"gpu": 1}}], "field 'queues[0].max.gpu': unknown resource"),
    ([{"name": "a", "colour": "red"}], "field 'queues[0]': unknown key(s) colour"),
    ([{"name": "a", "policy": "nonesuch"}], "field 'queues[0].policy': "),
    ([{"name": "a", "preemption": {"fair_share_threshold": 2}}],
     "field 'queues[0].preemption.fair_share_threshold': must be in [0, 1], got 2"),
    ([{"name": "a", "preemption": {"min_share_timeout": 0}}],
     "field 'queues[0].preemption.min_share_timeout': must be positive, got 0"),
    ([], "field 'queues': needs at least one queue"),
    ([{"name": "a", "capacity": 100}, {"name": "b", "capacity": 0}],
     "field 'queues[1].capacity': capacity 0 needs a weight of its own"),
    ([{"name": "a", "policy": "drfh-bf"}], "field 'queues': policy drfh-bf keys per node, picks nodes or counts slots"),
])
def test_bad_queues_name_the_field(queues, message):
    assert message in _error(queues)


def test_a_cycle_through_a_yaml_alias_is_refused(tmp_path):
    path = tmp_path / "cycle.yaml"
    path.write_text(textwrap.dedent("""\
        cluster: {nodes: [{name: n1, capacity: {cpu: 1}}]}
        workload: {jobs: [{id: j, tasks: 1, demand: {cpu: 1}, duration: 1}]}
        queues: &top
          - {name: a, children: *top}
        """))
    with pytest.raises(InputError, match=r"cycle.yaml: field 'queues\[0\].children': a queue contains itself"):
        load_config(path)


@pytest.mark.parametrize("command", ["simulate", "replay"])
def test_bad_queues_exit_2_with_one_line(tmp_path, capsys, command):
    path = tmp_path / "bad.yaml"
    path.write_text(SCHEMA.replace("weight: 2", "weight: -2"))
    code = main([command, str(path), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].endswith("bad.yaml: field 'queues[0].weight': must be positive, got -2")
