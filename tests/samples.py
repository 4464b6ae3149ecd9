"""Configs that several test modules share (no test module imports another).

* ``SMALL`` / ``small_config`` — four nodes and two jobs, quick to replay on Ray:
  a1, a2 <cpu:2; memory_mb:2048; disk=ssd>, b1, b2 <cpu:1; memory_mb:2048>; j1 = 20 tasks
  of <1 cpu, 512 MB> (about 5 s) from t=0, j2 = 10 tasks of <0.5 cpu, 512 MB> (4 s,
  disk == ssd) from t=2; time scale 0.05.
* ``MIXED`` — three racks of different shapes, nodes joining and leaving, every kind of
  constraint and duration, one job no node can run.
* ``FIG2_YAML`` — tsf-paper Fig. 2 as a config: m1, m2 <18 cpu, 18 GB>; u1 <1, 2>
  anywhere, u2 <1, 3> on m2 only.
* ``REJECTS`` / ``REASONS`` — a runnable job and three that no node can ever run, with
  the reason each is rejected.
* ``TWO_QUEUES`` — preemption between two queues: 4 nodes <cpu:2; 8 GB> = 8 slots; a's
  a1 asks 16 tasks of 20 s from 0, b's b1 4 tasks of 5 s from 2; fair_share_timeout 3,
  threshold 0.5, grace 3; time scale 0.1.
"""

from __future__ import annotations

import json

from rayrm.rm.core.config import ExperimentConfig, parse_config

SMALL = {
    "name": "small",
    "cluster": {"nodes": [
        {"name": "a{i}", "count": 2, "capacity": {"cpu": 2, "memory_mb": 2048}, "attributes": {"disk": "ssd"}},
        {"name": "b{i}", "count": 2, "capacity": {"cpu": 1, "memory_mb": 2048}}]},
    "workload": {"jobs": [
        {"id": "j1", "submit": 0, "tasks": 20, "demand": {"cpu": 1, "memory_mb": 512},
         "duration": {"mean": 5, "jitter": 0.2}},
        {"id": "j2", "submit": 2, "tasks": 10, "demand": {"cpu": 0.5, "memory_mb": 512},
         "duration": 4, "constraint": "disk == ssd"}]},
    "policy": "tsf",
    "run": {"seed": 3, "time_scale": 0.05},
}


def small_config(**changes) -> ExperimentConfig:
    doc = json.loads(json.dumps(SMALL))
    for key, value in changes.items():
        doc[key] = value
    return parse_config(doc)


def node(name, cpu, mem, **attrs):
    return {"name": name, "capacity": {"cpu": cpu, "memory_mb": mem}, "attributes": attrs}


def job(id, submit, tasks, cpu, mem, duration, constraint=""):
    return {"id": id, "submit": submit, "tasks": tasks, "demand": {"cpu": cpu, "memory_mb": mem},
            "duration": duration, "constraint": constraint}


# Three racks of different shapes, a node joining at 20 s, b2 away from 30 s to 60 s,
# c2 leaving for good at 45 s; jobs with every kind of constraint and duration.
MIXED = {
    "name": "mixed",
    "cluster": {
        "nodes": [{"name": "a{i}", "count": 4, "capacity": {"cpu": 4, "memory_mb": 8192},
                   "attributes": {"rack": "a", "gpu": "no"}},
                  {"name": "b{i}", "count": 4, "capacity": {"cpu": 8, "memory_mb": 4096},
                   "attributes": {"rack": "b", "gpu": "no"}},
                  {"name": "c{i}", "count": 2, "capacity": {"cpu": 2, "memory_mb": 16384},
                   "attributes": {"rack": "c", "gpu": "yes"}}],
        "events": [{"time": 20, "join": node("d1", 6, 6144, rack="d")},
                   {"time": 30, "leave": "b2"},
                   {"time": 45, "leave": "c2"},
                   {"time": 60, "join": node("b2", 8, 4096, rack="b", gpu="no")}],
    },
    "workload": {"jobs": [
        job("web", 0, 40, 1, 1024, {"mean": 12, "jitter": 0.3}),
        job("etl", 0, 60, 2, 2048, {"dist": "exponential", "mean": 9}, "rack == a"),
        job("ml", 5, 12, 1, 4096, {"dist": "lognormal", "mean": 20, "sigma": 0.5}, "gpu == yes"),
        job("batch", 10, 50, 0.5, 512, {"dist": "pareto", "alpha": 1.9, "mean": 6}, "rack in (a, b)"),
        job("pinned", 12, 8, 1, 1024, [3, 0, 7, 1, 9, 2, 0, 4], "node in (a1, b2, c1)"),
        job("wide", 25, 30, 3, 1024, 10, "rack != c"),
        job("late", 70, 20, 1, 512, {"mean": 5, "jitter": 0.1}),
        job("huge", 3, 2, 64, 1024, 5),                              # fits no node: rejected
    ]},
    "run": {"seed": 7},
}


BASE = {
    "name": "base",
    "cluster": {"nodes": [{"name": "n{i}", "count": 2, "capacity": {"cpu": 2, "memory_mb": 2048},
                           "attributes": {"disk": "ssd"}}]},
    "workload": {"jobs": [{"id": "ok", "submit": 0, "tasks": 4, "demand": {"cpu": 1, "memory_mb": 512},
                           "duration": 2}]},
}

REJECTS = dict(BASE, workload={"jobs": BASE["workload"]["jobs"] + [
    {"id": "gpu", "tasks": 1, "demand": {"cpu": 1, "gpu": 1}, "duration": 2},
    {"id": "nomatch", "tasks": 1, "demand": {"cpu": 1}, "duration": 2, "constraint": "disk == hdd"},
    {"id": "huge", "tasks": 1, "demand": {"cpu": 4}, "duration": 2}]})
REASONS = {"gpu": "demand names resource gpu that no node has",
           "nomatch": "no node matches constraint 'disk == hdd'",
           "huge": "demand cpu:4 exceeds every eligible node (2 match the constraint)"}


FIG2_YAML = """
cluster:
  nodes:
    - {name: m1, capacity: {cpu: 18, memory_mb: 18}}
    - {name: m2, capacity: {cpu: 18, memory_mb: 18}}
workload:
  jobs:
    - {id: u1, tasks: 100, demand: {cpu: 1, memory_mb: 2}, duration: 10}
    - {id: u2, tasks: 100, demand: {cpu: 1, memory_mb: 3}, duration: 10, constraint: "node in (m2)"}
policy: tsf
"""


def small_two_node_cluster():
    """The two-node ``ray.cluster_utils.Cluster`` that ``ray_start_args`` asks for the small
    config (the head labelled disk=ssd, one CPU each, a small object store), joined by this
    process; returns (cluster, the worker node).  The caller shuts both down."""
    import ray  # noqa: PLC0415
    from ray.cluster_utils import Cluster  # noqa: PLC0415

    from rayrm.rm.runtime.native import ray_start_args  # noqa: PLC0415
    from rayrm.rm.runtime.session import SYSTEM_CONFIG  # noqa: PLC0415
    store = 80 * 1024 * 1024
    head, worker = ray_start_args(small_config())
    cluster = Cluster(initialize_head=True, head_node_args={
        **head, "num_cpus": 1, "object_store_memory": store, "include_dashboard": False,
        "_system_config": SYSTEM_CONFIG})
    node = cluster.add_node(**worker | {"num_cpus": 1}, object_store_memory=store)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="rayrm", logging_level="ERROR")
    return cluster, node


TWO_QUEUES = {
    "name": "two-queues-preempt",
    "cluster": {"nodes": [{"name": "n{i}", "count": 4, "capacity": {"cpu": 2, "memory_mb": 8192}}]},
    "queues": [{"name": "a"}, {"name": "b"}],
    "preemption": {"enabled": True, "fair_share_timeout": 3, "fair_share_threshold": 0.5, "grace": 3},
    "policy": "tsf",
    "run": {"seed": 1, "time_scale": 0.1},
    "workload": {"jobs": [
        {"id": "a1", "submit": 0, "tasks": 16, "demand": {"cpu": 1, "memory_mb": 512}, "duration": 20, "queue": "a"},
        {"id": "b1", "submit": 2, "tasks": 4, "demand": {"cpu": 1, "memory_mb": 512}, "duration": 5, "queue": "b"}]},
}
