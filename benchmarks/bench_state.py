"""The RM's hot paths without Ray: ``node_heartbeat`` and ``allocate`` on ``ResourceManagerState``.

A cluster of ``--nodes`` NMs (4 cpus each) on ``--hosts`` NM hosts and ``--apps`` apps of
tasks of 1 cpu, all asking at once; each round (0.1 wall s of the state's clock) every
NM host heartbeats its NMs in one call — the NMs whose containers started since the
last round report them RUNNING, those that ran ``--task-rounds`` rounds report them
COMPLETE, the others are idle names — and one AM host allocates for every app (each
idle, with what arrived delivered).  Printed: CPU microseconds per call of each kind
(``process_time``: a shared machine's waiting is left out), the least of ``--repeats``
runs (what noise remains only adds).

    python benchmarks/bench_state.py [--nodes 1000 --hosts 10 --apps 100 --rounds 200]

Compare two worktrees by running it with each one's ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import gc
import time

from rayrm.rm.core.clock import TraceClock
from rayrm.rm.core.model import AppSpec, NodeSpec, Resources
from rayrm.rm.service.calls import Call
from rayrm.rm.service.protocol import (COMPLETE, FINISHED, RUNNING, AllocateRequest, AppMark,
                                      AppRegistration, ContainerStatus, NodeHeartbeat, NodeRegistration)
from rayrm.rm.service.state import ResourceManagerState


def run(nodes: int, hosts: int, apps: int, rounds: int, task_rounds: int) -> dict[Call, float]:
    """One run: CPU seconds per call of each kind."""
    specs = [NodeSpec(f"n{i:04d}", Resources.parse("cpu:4;memory_mb:16384")) for i in range(nodes)]
    state = ResourceManagerState(dims=("cpu", "memory_mb"), nodes=specs, policy="tsf", policy_name="tsf")
    host_of = {s.name: f"nm-{i % hosts}" for i, s in enumerate(specs)}
    rid: dict[str, int] = {}

    def next_id(caller):
        rid[caller] = rid.get(caller, 0) + 1
        return rid[caller]

    for h in sorted(set(host_of.values())):
        regs = [NodeRegistration(s.name, dict(s.capacity), {}, "ray", 0) for s in specs if host_of[s.name] == h]
        state.register_nodes(0.0, h, next_id(h), regs)
    state.start_clock(0.0, TraceClock(0.0, 1.0))
    app_specs = [AppSpec(f"a{i:03d}", Resources.parse("cpu:1;memory_mb:1024"), num_tasks=10**6)
                 for i in range(apps)]
    state.register_apps(0.0, "am", next_id("am"), [AppRegistration(a) for a in app_specs])
    state.allocate(0.0, "am", next_id("am"), [AllocateRequest(a.app_id, 1, 10**6) for a in app_specs], 0.0)
    started: dict[int, tuple] = {}            # container -> (app, node, task, round started)
    fresh: list[tuple] = []                    # (container, app, node, task) delivered, not yet reported
    task = 0
    spent = {Call.NODE_HEARTBEAT: 0.0, Call.ALLOCATE: 0.0}
    for k in range(1, rounds + 1):
        now = k * 0.1
        by_node: dict[str, list] = {}
        for cid, app, node, t in fresh:
            started[cid] = (app, node, t, k)
            by_node.setdefault(node, []).append(ContainerStatus(cid, app, t, 0, node, RUNNING, now))
        fresh = []
        for cid, (app, node, t, k0) in list(started.items()):
            if k - k0 >= task_rounds:
                del started[cid]
                by_node.setdefault(node, []).append(
                    ContainerStatus(cid, app, t, 0, node, COMPLETE, now, now, now, FINISHED))
        for h in sorted(set(host_of.values())):
            mine = [s.name for s in specs if host_of[s.name] == h]
            beats = [NodeHeartbeat(n, tuple(by_node[n])) for n in mine if n in by_node]
            idle = tuple(n for n in mine if n not in by_node)
            t0 = time.process_time()
            state.node_heartbeat(now, h, next_id(h), beats, idle, now)
            spent[Call.NODE_HEARTBEAT] += time.process_time() - t0
        t0 = time.process_time()
        out = state.allocate(now, "am", next_id("am"), [], now, AppMark())     # every AM idle
        spent[Call.ALLOCATE] += time.process_time() - t0
        for resp in out:
            for alloc in resp.allocated:
                fresh.append((alloc.container, alloc.app, alloc.node, task))
                task += 1
    calls = {Call.NODE_HEARTBEAT: rounds * hosts, Call.ALLOCATE: rounds}
    return {call: seconds / calls[call] for call, seconds in spent.items()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--hosts", type=int, default=10)
    ap.add_argument("--apps", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--task-rounds", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    best: dict[Call, float] = {}
    for _ in range(args.repeats):
        gc.collect()
        spent = run(args.nodes, args.hosts, args.apps, args.rounds, args.task_rounds)
        for call, per in spent.items():
            best[call] = min(best.get(call, per), per)
    for call, per in best.items():
        print(f"{call.value:15s} {per * 1e6:9.1f} us per call (least of {args.repeats})")


if __name__ == "__main__":
    main()
