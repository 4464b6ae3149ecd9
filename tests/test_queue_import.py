"""Queue files into the config's queues: tree — YARN's Fair and Capacity Scheduler files,
Hadoop SLS's own test resources, jobs' queues and users, and bad input as one line."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from rayrm.rm.cli.main import main
from rayrm.rm.core.config import load_config
from rayrm.rm.core.errors import InputError
from rayrm.traces.importers.common import SkipReport
from rayrm.traces.importers.queue_files import read_yarn_queues, resources
from rayrm.traces.importers.queues import queue_tree

HADOOP = Path(__file__).parent / "data" / "sls" / "hadoop"

FAIR = """<?xml version="1.0"?>
<allocations>
  <defaultQueueSchedulingPolicy>drf</defaultQueueSchedulingPolicy>
  <queueMaxAppsDefault>50</queueMaxAppsDefault>
  <defaultMinSharePreemptionTimeout>30</defaultMinSharePreemptionTimeout>
  <queue name="root">
    <fairSharePreemptionThreshold>0.6</fairSharePreemptionThreshold>
    <queue name="eng" type="parent">
      <weight>2.0</weight>
      <maxResources>memory-mb=60%, vcores=60%</maxResources>
      <fairSharePreemptionTimeout>60</fairSharePreemptionTimeout>
      <queue name="batch">
        <minResources>memory-mb=40Gi, vcores=10</minResources>
        <maxRunningApps>20</maxRunningApps>
        <schedulingPolicy>fifo</schedulingPolicy>
      </queue>
      <pool name="adhoc">
        <minResources>1024 mb, 1 vcores</minResources>
        <maxResources>50% memory, 25% cpu</maxResources>
        <aclSubmitApps>alice</aclSubmitApps>
      </pool>
    </queue>
    <queue name="research" type="parent">
      <weight>1</weight>
      <maxResources>40%</maxResources>
      <schedulingPolicy>org.apache.hadoop.yarn.server.resourcemanager.scheduler.fair.policies.FairSharePolicy</schedulingPolicy>
    </queue>
  </queue>
  <queuePlacementPolicy><rule name="specified"/></queuePlacementPolicy>
</allocations>
"""


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_hadoop_sls_fair_scheduler_follows_its_allocation_file():
    report = SkipReport("q")
    yarn = read_yarn_queues(HADOOP / "fair-scheduler.xml", report)
    # fair-scheduler.xml names src/test/resources/fair-scheduler-allocation.xml: found beside it.
    # Each queue: <minResources>1024 mb, 1 vcores</minResources>, <schedulingMode>fair</schedulingMode>
    # (-> cmmf-mem, YARN's memory max-min), <minSharePreemptionTimeout>2</minSharePreemptionTimeout>.
    common = {"min": {"memory_mb": 1024, "cpu": 1}, "policy": "cmmf-mem", "preemption": {"min_share_timeout": 2}}
    assert yarn.queues == [{"name": "sls_queue_1", "weight": 0.25, **common},
                           {"name": "sls_queue_2", "weight": 0.25, **common},
                           {"name": "sls_queue_3", "weight": 0.5, **common}]
    assert (yarn.kind, yarn.policy) == ("fair", None)
    assert report.notes() == {"queue-file settings rayrm does not model (ignored): user, userMaxAppsDefault": 1}
    # its yarn.scheduler.fair.preemption is true and it sets no waitTimeBeforeKill: YARN's
    # 15000 ms -> grace 15 s
    assert yarn.preemption == {"enabled": True, "grace": 15}
    # the allocation file alone does not switch it on (the switch is a yarn-site property)
    assert read_yarn_queues(HADOOP / "fair-scheduler-allocation.xml").preemption is None


def site(tmp_path, props: dict, capacity: bool) -> str:
    """A <configuration> with ``props``: SLS's capacity-scheduler.xml's queues, or one naming
    SLS's allocation file."""
    if capacity:
        props = {"yarn.scheduler.capacity.root.queues": "a,b", "yarn.scheduler.capacity.root.a.capacity": "40",
                 "yarn.scheduler.capacity.root.b.capacity": "60", **props}
    else:
        props = {"yarn.scheduler.fair.allocation.file": str(HADOOP / "fair-scheduler-allocation.xml"), **props}
    body = "".join(f"<property><name>{k}</name><value>{v}</value></property>" for k, v in props.items())
    return write(tmp_path, "site.xml", f"<configuration>{body}</configuration>")


def test_yarn_site_switches_preemption_on(tmp_path):
    fair = read_yarn_queues(site(tmp_path, {"yarn.scheduler.fair.preemption": "true",
                                            "yarn.scheduler.fair.waitTimeBeforeKill": "10000"}, False))
    assert fair.preemption == {"enabled": True, "grace": 10}                 # 10000 ms
    assert read_yarn_queues(site(tmp_path, {"yarn.scheduler.fair.preemption": "false"}, False)).preemption is None
    # the Capacity Scheduler's monitor with its default policy (ProportionalCapacityPreemptionPolicy):
    # a queue below its ideal assignment at a round (monitoring_interval 2000 ms -> 2 s, threshold 1)
    # loses containers after max_wait_before_kill (default 15000 ms -> 15 s)
    on = {"yarn.resourcemanager.scheduler.monitor.enable": "true",
          "yarn.resourcemanager.monitor.capacity.preemption.monitoring_interval": "2000"}
    cap = read_yarn_queues(site(tmp_path, on, True))
    assert cap.kind == "capacity"
    assert cap.preemption == {"enabled": True, "grace": 15, "fair_share_timeout": 2, "fair_share_threshold": 1.0}
    other = {**on, "yarn.resourcemanager.scheduler.monitor.policies": "org.example.SomeOtherMonitor"}
    assert read_yarn_queues(site(tmp_path, other, True)).preemption is None


@pytest.mark.parametrize("props, message", [
    ({"yarn.scheduler.fair.preemption": "yes"}, "yarn.scheduler.fair.preemption: must be true or false"),
    ({"yarn.scheduler.fair.preemption": "true", "yarn.scheduler.fair.waitTimeBeforeKill": "-5"},
     "yarn.scheduler.fair.waitTimeBeforeKill: must be a positive number"),
])
def test_bad_site_preemption_names_file_and_property(tmp_path, props, message):
    path = site(tmp_path, props, False)
    with pytest.raises(InputError) as e:
        read_yarn_queues(path)
    assert message in str(e.value).replace("'", "") and "site.xml" in str(e.value)


def test_hadoop_sls_capacity_scheduler():
    yarn = read_yarn_queues(HADOOP / "capacity-scheduler.xml")
    # capacities 25 + 25 + 50 = 100; maximum-capacity 100 is no cap, so it is not written.
    assert yarn.queues == [{"name": "sls_queue_1", "capacity": 25}, {"name": "sls_queue_2", "capacity": 25},
                           {"name": "sls_queue_3", "capacity": 50}]
    assert yarn.ignored == {"reservable", "show-reservations-as-queues"}


def test_fair_allocation_file_every_form(tmp_path):
    report = SkipReport("q")
    yarn = read_yarn_queues(write(tmp_path, "alloc.xml", FAIR), report)
    assert yarn.policy == "drf"                       # defaultQueueSchedulingPolicy
    # root's threshold 0.6 and the default min-share timeout 30 s go down to every queue;
    # eng's own fair-share timeout 60 s to its children; queueMaxAppsDefault 50 where unset.
    eng_pre = {"min_share_timeout": 30, "fair_share_threshold": 0.6, "fair_share_timeout": 60}
    assert yarn.queues == [
        {"name": "eng", "weight": 2, "max": {"memory_mb": "60%", "cpu": "60%"}, "max_apps": 50,
         "preemption": eng_pre, "children": [
             # 40Gi = 40 x 1024 = 40960 MB
             {"name": "batch", "min": {"memory_mb": 40960, "cpu": 10}, "max_apps": 20, "policy": "fifo",
              "preemption": eng_pre},
             {"name": "adhoc", "min": {"memory_mb": 1024, "cpu": 1}, "max": {"memory_mb": "50%", "cpu": "25%"},
              "max_apps": 50, "preemption": eng_pre}]},
        # type="parent" without children is a leaf; one "40%" is every resource's.
        {"name": "research", "weight": 1, "max": {"cpu": "40%", "memory_mb": "40%"}, "max_apps": 50,
         "policy": "cmmf-mem", "preemption": {"min_share_timeout": 30, "fair_share_threshold": 0.6}}]
    assert yarn.ignored == {"aclSubmitApps", "queuePlacementPolicy"}


def test_the_fair_tree_loads_as_a_config(tmp_path):
    yarn = read_yarn_queues(write(tmp_path, "alloc.xml", FAIR))
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({
        "resources": ["cpu", "memory_mb"],
        "cluster": {"nodes": [{"name": "n{i}", "count": 10, "capacity": {"cpu": 16, "memory_mb": 65536}}]},
        "queues": yarn.queues, "policy": yarn.policy,
        "workload": {"jobs": [{"id": "j1", "queue": "eng.batch", "user": "alice", "tasks": 1,
                               "demand": {"cpu": 1, "memory_mb": 1024}, "duration": 5}]}}))
    cfg = load_config(config)
    assert [q.full_name for q in cfg.queues.queues()][:4] == ["root", "root.eng", "root.eng.batch", "root.eng.adhoc"]
    assert (cfg.jobs[0].app.queue, cfg.jobs[0].app.user) == ("eng.batch", "alice")


CAPACITY = """<configuration>
  <property><name>yarn.scheduler.capacity.root.queues</name><value>prod, dev</value></property>
  <property><name>yarn.scheduler.capacity.root.prod.capacity</name><value>70</value></property>
  <property><name>yarn.scheduler.capacity.root.prod.maximum-capacity</name><value>-1</value></property>
  <property><name>yarn.scheduler.capacity.root.prod.ordering-policy</name><value>fair</value></property>
  <property><name>yarn.scheduler.capacity.root.prod.user-limit-factor</name><value>2</value></property>
  <property><name>yarn.scheduler.capacity.root.prod.minimum-user-limit-percent</name><value>25</value></property>
  <property><name>yarn.scheduler.capacity.root.dev.capacity</name><value>30</value></property>
  <property><name>yarn.scheduler.capacity.root.dev.maximum-capacity</name><value>60</value></property>
  <property><name>yarn.scheduler.capacity.root.dev.queues</name><value>a,b</value></property>
  <property><name>yarn.scheduler.capacity.root.dev.ordering-policy</name><value>utilization</value></property>
  <property><name>yarn.scheduler.capacity.root.dev.a.capacity</name><value>40.5</value></property>
  <property><name>yarn.scheduler.capacity.root.dev.a.maximum-applications</name><value>10</value></property>
  <property><name>yarn.scheduler.capacity.root.dev.a.ordering-policy</name><value>fifo</value></property>
  <property><name>yarn.scheduler.capacity.root.dev.b.capacity</name><value>59.5</value></property>
  <property><name>yarn.scheduler.capacity.root.dev.b.acl_submit_applications</name><value>*</value></property>
</configuration>
"""


def test_capacity_scheduler_nested(tmp_path):
    yarn = read_yarn_queues(write(tmp_path, "capacity-scheduler.xml", CAPACITY))
    # prod 70 + dev 30 = 100; dev's a 40.5 + b 59.5 = 100.  maximum-capacity -1 is no cap;
    # a parent's utilization ordering is left to the config's policy.
    assert yarn.queues == [
        {"name": "prod", "capacity": 70, "user_limit_factor": 2, "min_user_limit_percent": 25,
         "policy": "cmmf-mem"},
        {"name": "dev", "capacity": 30, "max_capacity": 60, "children": [
            {"name": "a", "capacity": 40.5, "max_apps": 10, "policy": "fifo"},
            {"name": "b", "capacity": 59.5}]}]
    assert yarn.ignored == {"acl_submit_applications"}


def test_capacity_absolute_and_weight_forms(tmp_path):
    text = CAPACITY.replace("<value>70</value>", "<value>[memory=10240,vcores=12]</value>") \
                   .replace("<value>30</value>", "<value>2w</value>")
    yarn = read_yarn_queues(write(tmp_path, "cs.xml", text))
    assert yarn.queues[0]["min"] == {"memory_mb": 10240, "cpu": 12}
    assert yarn.queues[1]["weight"] == 2 and "capacity" not in yarn.queues[1]


def test_resource_forms():
    assert resources("1024 mb, 1 vcores", "f", "w") == {"memory_mb": 1024, "cpu": 1}
    assert resources("vcores=2, memory-mb=2Gi, yarn.io/gpu=1", "f", "w") == {"cpu": 2, "memory_mb": 2048, "gpu": 1}
    assert resources("memory-mb=50%, vcores=25.5%", "f", "w") == {"memory_mb": "50%", "cpu": "25.5%"}
    assert resources("25% cpu, 50% memory", "f", "w") == {"cpu": "25%", "memory_mb": "50%"}


BAD = [
    ("broken.xml", "<allocations><queue name='a'></allocations>", "malformed XML: mismatched tag"),
    ("fair.xml", "<allocations><queue name='a'><weight>0</weight></queue></allocations>",
     "field 'queue root.a weight': must be a positive number, got '0'"),
    ("fair.xml", "<allocations><queue name='a'><maxResources>120%</maxResources></queue></allocations>",
     "field 'queue root.a maxResources': must be at most 100, got '120'"),
    ("fair.xml", "<allocations><queue name='a'><minResources>lots</minResources></queue></allocations>",
     "field 'queue root.a minResources': cannot read 'lots'"),
    ("fair.xml", "<allocations><queue name='a'><schedulingPolicy>lottery</schedulingPolicy></queue></allocations>",
     "field 'queue root.a schedulingPolicy': unknown scheduling policy 'lottery'"),
    ("fair.xml", "<allocations><queue name='a'/><queue name='a'/></allocations>",
     "field 'queue root.a': queue root.a is defined twice"),
    ("cs.xml", CAPACITY.replace("<value>70</value>", "<value>seventy</value>"),
     "field 'yarn.scheduler.capacity.root.prod.capacity': must be a non-negative number, got 'seventy'"),
    ("cs.xml", CAPACITY.replace("<value>60</value>", "<value>160</value>"),
     "field 'yarn.scheduler.capacity.root.dev.maximum-capacity': must be at most 100, got '160'"),
    # 70 + 20 = 90
    ("cs.xml", CAPACITY.replace("<value>30</value>", "<value>20</value>"),
     "field 'yarn.scheduler.capacity.root.*.capacity': the capacities of root's children must sum to 100, "
     "got 70 + 20 = 90"),
    ("cs.xml", CAPACITY.replace("<value>40.5</value>", "<value>0</value>").replace("<value>59.5</value>", "<value>100</value>"),
     "field 'yarn.scheduler.capacity.root.dev.a.capacity': queue root.dev.a has capacity 0"),
    ("other.xml", "<configuration><property><name>x</name><value>1</value></property></configuration>",
     "neither a Fair Scheduler allocation file"),
]


@pytest.mark.parametrize("name,text,message", BAD, ids=[m[:40] for _, _, m in BAD])
def test_bad_queue_files_name_the_file_and_field(tmp_path, name, text, message):
    path = write(tmp_path, name, text)
    with pytest.raises(InputError) as e:
        queue_tree(None, path)
    assert str(e.value).startswith(path) and message in str(e.value)


def test_queue_weights_alone_and_over_a_file(tmp_path):
    # Alone: a flat tree, dotted names nest.
    alone = queue_tree("eng.batch=2,research=0.5", None)
    assert alone.queues == [{"name": "eng", "children": [{"name": "batch", "weight": 2}]},
                            {"name": "research", "weight": 0.5}]
    # Over a file: the named queue's weight changes, the rest is the file's.
    over = queue_tree("root.sls_queue_3=4", str(HADOOP / "fair-scheduler.xml"))
    assert [q.get("weight") for q in over.queues] == [0.25, 0.25, 4]
    with pytest.raises(InputError, match="--queue-weights.*positive"):
        queue_tree("a=-1", None)
    missing = str(tmp_path / "nope.xml")
    with pytest.raises(InputError, match=f"^{missing}: cannot read queue file: No such file"):
        queue_tree(None, missing)
    (tmp_path / "binary.xml").write_bytes(b"\xff\xfe<\x00")
    with pytest.raises(InputError, match="binary.xml: not a text file"):
        queue_tree(None, str(tmp_path / "binary.xml"))


def run_cli(capsys, *argv) -> tuple[int, list[str]]:
    code = main(list(argv))
    err = capsys.readouterr().err.strip().splitlines()
    return code, err


def test_cli_imports_hadoop_sls_files_with_queues_and_users(tmp_path, capsys):
    # inputsls.json: job_1 in sls_queue_1 (3 maps), job_2 in sls_queue_2 (2 maps), user "default";
    # syn.json: 10 SYNTH jobs of user foobar in sls_queue_1.
    code, err = run_cli(capsys, "trace", "import", "sls", str(HADOOP / "inputsls.json"), str(HADOOP / "syn.json"),
                        "--queue-file", str(HADOOP / "fair-scheduler.xml"), "--drop-queue-policies",
                        "-o", str(tmp_path / "sls.yaml"))
    assert code == 0, err
    doc = yaml.safe_load((tmp_path / "sls.yaml").read_text())
    assert [(q["name"], q["weight"], "policy" in q) for q in doc["queues"]] == \
        [("sls_queue_1", 0.25, False), ("sls_queue_2", 0.25, False), ("sls_queue_3", 0.5, False)]
    # fair-scheduler.xml's yarn.scheduler.fair.preemption true, no waitTimeBeforeKill (15000 ms);
    # the allocation file's minSharePreemptionTimeout 2 on each queue
    assert doc["preemption"] == {"enabled": True, "grace": 15.0}
    assert [q["preemption"] for q in doc["queues"]] == [{"min_share_timeout": 2.0}] * 3
    rows = list(csv.DictReader(open(tmp_path / "sls.jobs.csv")))
    by_id = {r["id"]: r for r in rows}
    assert (by_id["job_1"]["queue"], by_id["job_1"]["user"], by_id["job_1"]["weight"]) == ("sls_queue_1", "default", "1")
    assert by_id["job_2"]["queue"] == "sls_queue_2"
    synth = [r for r in rows if r["id"].startswith("class_1_")]
    assert synth and {(r["queue"], r["user"]) for r in synth} == {("sls_queue_1", "foobar")}
    code, err = run_cli(capsys, "simulate", str(tmp_path / "sls.yaml"), "--out", str(tmp_path / "run"))
    assert code == 0, err
    jobs = list(csv.DictReader(open(tmp_path / "run" / "jobs.csv")))
    assert len(jobs) == len(rows) and all(j["status"] == "finished" for j in jobs)
    settings = json.loads((tmp_path / "run" / "summary.json").read_text())["preemption"]["settings"]
    # the root's settings as the run read them (the threshold YARN's default, 0.5; timeouts unset: never)
    assert settings == {"enabled": True, "grace": 15.0, "fair_share_threshold": 0.5}


@pytest.mark.parametrize("allocation, site, message", [
    ("<fairSharePreemptionThreshold>1.5</fairSharePreemptionThreshold>", {},
     "field 'queue root.a fairSharePreemptionThreshold': must be at most 1, got '1.5'"),
    ("<minSharePreemptionTimeout>-3</minSharePreemptionTimeout>", {},
     "field 'queue root.a minSharePreemptionTimeout': must be a positive number, got '-3'"),
    ("<fairSharePreemptionTimeout>soon</fairSharePreemptionTimeout>", {},
     "field 'queue root.a fairSharePreemptionTimeout'"),
    ("", {"yarn.scheduler.fair.waitTimeBeforeKill": "0"}, "field 'yarn.scheduler.fair.waitTimeBeforeKill'"),
])
def test_cli_bad_preemption_values_are_one_line_exit_2(tmp_path, capsys, allocation, site, message):
    alloc = write(tmp_path, "alloc.xml", f'<allocations><queue name="a">{allocation}</queue>'
                                         '<queue name="b"/></allocations>')
    props = {"yarn.scheduler.fair.allocation.file": "alloc.xml", "yarn.scheduler.fair.preemption": "true", **site}
    body = "".join(f"<property><name>{k}</name><value>{v}</value></property>" for k, v in props.items())
    named = write(tmp_path, "fair-site.xml", f"<configuration>{body}</configuration>")
    code, lines = run_cli(capsys, "trace", "import", "sls", str(HADOOP / "inputsls.json"), "--queue-file", named,
                          "-o", str(tmp_path / "x.yaml"))
    assert code == 2 and len(lines) == 1, lines
    assert message in lines[0] and ("alloc.xml" in lines[0] or "fair-site.xml" in lines[0])
    assert not (tmp_path / "x.yaml").exists()


def test_cli_bad_queue_file_is_one_line_exit_2(tmp_path, capsys):
    bad = write(tmp_path, "cs.xml", CAPACITY.replace("<value>30</value>", "<value>20</value>"))
    code, lines = run_cli(capsys, "trace", "import", "sls", str(HADOOP / "inputsls.json"), "--queue-file", bad,
                          "-o", str(tmp_path / "x.yaml"))
    assert code == 2
    assert len(lines) == 1 and bad in lines[0] and "must sum to 100" in lines[0]
    assert not (tmp_path / "x.yaml").exists()


def test_the_readme_example_imports_as_its_tree(tmp_path, capsys):
    root = Path(__file__).resolve().parents[1] / "examples" / "queues"
    code, err = run_cli(capsys, "trace", "import", "sls", str(root / "sls-jobs.json"),
                        "--queue-file", str(root / "fair-scheduler.xml"), "-o", str(tmp_path / "queues.yaml"))
    assert code == 0, err
    doc = yaml.safe_load((tmp_path / "queues.yaml").read_text())
    # defaultQueueSchedulingPolicy drf is the config's policy; reports' max is 50% of each resource
    assert doc["policy"] == "drf"
    assert doc["queues"] == [
        {"name": "analytics", "weight": 0.5, "children": [
            {"name": "adhoc", "max_apps": 10}, {"name": "reports", "max": {"memory_mb": "50%", "cpu": "50%"}}]},
        {"name": "prod", "weight": 1, "min": {"memory_mb": 8192, "cpu": 8}, "preemption": {"min_share_timeout": 60}}]
    cfg = load_config(tmp_path / "queues.yaml")
    assert sorted({(j.app.queue, j.app.user, j.app.weight) for j in cfg.jobs}) == [
        ("analytics.adhoc", "analyst1", 1.0), ("analytics.adhoc", "analyst2", 1.0), ("prod", "etl", 1.0)]


def test_rumen_jobs_keep_their_queue_and_user_and_make_the_flat_tree():
    from rayrm.traces.importers.sls import import_sls

    report = SkipReport("rumen")
    result = import_sls([Path(__file__).parent / "data" / "sls" / "rumen.json"], report)
    # rumen.json: alice's job in sls_queue_1, bob's in sls_queue_2 (Rumen's user and queue)
    assert sorted({(j.app.queue, j.app.user) for j in result.jobs}) == [("sls_queue_1", "alice"),
                                                                      ("sls_queue_2", "bob")]
    # no queue file: the queues the jobs name, weight 1 each, beside default
    assert result.queues == [{"name": "default"}, {"name": "sls_queue_1"}, {"name": "sls_queue_2"}]
    assert report.notes()["queues the jobs name and no queue file defines, made with weight 1 (as the Fair "
                          "Scheduler makes them)"] == 2


@pytest.mark.parametrize("name,text,message", [
    # inputsls.json's 3 nodes of SLS's default <10 vcores, 10240 MB>: 30720 MB; min 40960 MB is above
    # max 50% = 15360 MB (memory is the first resource the minResources names)
    ("alloc.xml", "<allocations><queue name='a'><minResources>40960 mb, 40 vcores</minResources>"
                  "<maxResources>50%</maxResources></queue></allocations>",
     "field 'queues[0].min.memory_mb': min 40960 is above max 15360"),
    ("tree.yaml", "queues: [{name: a, weight: 1, colour: red}]", "field 'queues[0]': unknown key(s) colour"),
])
def test_a_tree_the_cluster_cannot_hold_names_the_queue_file(tmp_path, name, text, message):
    from rayrm.traces.importers.sls import import_sls

    path = write(tmp_path, name, text)
    with pytest.raises(InputError) as e:
        import_sls([HADOOP / "inputsls.json"], SkipReport("q"), queues=queue_tree(None, path))
    assert str(e.value).startswith(path) and message in str(e.value)


def test_hadoop_capacity_scheduler_imports_and_simulates(tmp_path, capsys):
    code, err = run_cli(capsys, "trace", "import", "sls", str(HADOOP / "inputsls.json"),
                        "--queue-file", str(HADOOP / "capacity-scheduler.xml"), "-o", str(tmp_path / "cs.yaml"))
    assert code == 0, err
    doc = yaml.safe_load((tmp_path / "cs.yaml").read_text())
    assert [(q["name"], q["capacity"]) for q in doc["queues"]] == [("sls_queue_1", 25), ("sls_queue_2", 25),
                                                                   ("sls_queue_3", 50)]
    code, err = run_cli(capsys, "simulate", str(tmp_path / "cs.yaml"), "--out", str(tmp_path / "run"))
    assert code == 0, err
    # job_1 (3 maps, sls_queue_1) and job_2 (2 maps, sls_queue_2) both finish
    jobs = {r["app"]: (r["status"], r["queue"]) for r in csv.DictReader(open(tmp_path / "run" / "jobs.csv"))}
    assert jobs == {"job_1": ("finished", "root.sls_queue_1"), "job_2": ("finished", "root.sls_queue_2")}
