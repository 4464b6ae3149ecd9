"""How many NodeManager heartbeats the ResourceManager actor handles.

Drives one RM actor with N logical NMs (default 2,000) heartbeating every
``--interval`` seconds at time scale 1 for ``--seconds`` (default 60), hosted in
NodeManager host actors (default one per Ray node, ``--hosts`` to override), and
prints:

* heartbeats handled per second by the RM, against the N / interval offered
  (the goal: >= 99% handled);
* backlog: NMs overdue by more than one interval when their batch went out
  (max and mean per batch);
* heartbeat round trip (one batched call, sent -> answered) p50/p99, and each
  NM's lateness (due -> answered; negative when its batch went out early)
  p50/p99 (the goal: p99 <= 100 ms).

``--journal`` runs the RM as a replay does, journaling every call and
snapshotting its state (rm/service/store.py) so it could survive a restart; without
it the RM keeps its state in memory only.

    python benchmarks/bench_heartbeats.py [--nms 2000] [--seconds 60] [--address auto]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as Affinity

from rayrm.nodes.host import NodeManagerHost
from rayrm.nodes.placement import alive_ray_nodes, place_nodes
from rayrm.rm.runtime.actor import ResourceManager
from rayrm.rm.service.calls import Call
from rayrm.rm.service.protocol import NAMESPACE, RM_NAME
from rayrm.rm.core.clock import TraceClock
from rayrm.rm.core.model import NodeSpec, Resources
from rayrm.rm.runtime.session import connect


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nms", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--interval", type=float, default=1.0, help="heartbeat interval, seconds")
    ap.add_argument("--hosts", type=int, default=0, help="NM host actors (default: one per Ray node)")
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--address")
    ap.add_argument("--journal", action="store_true", help="journal and snapshot the RM's state, as a replay does")
    args = ap.parse_args()

    started = connect(args.address)
    nodes = [NodeSpec(f"nm{i:05d}", Resources(cpu=8, memory_mb=16384), {"rack": f"r{i % 40}"})
             for i in range(args.nms)]
    ray_nodes = alive_ray_nodes()
    here = ray.get_runtime_context().get_node_id()
    if args.hosts:
        groups = [(ray_nodes[k % len(ray_nodes)].node_id, nodes[k::args.hosts]) for k in range(args.hosts)]
    else:
        placed = place_nodes(nodes, ray_nodes)
        by = {}
        for n in nodes:
            by.setdefault(placed[n.name].node_id, []).append(n)
        groups = list(by.items())
    rm = ResourceManager.options(name=RM_NAME, namespace=NAMESPACE,
                                 scheduling_strategy=Affinity(here, soft=True)).remote(
        dims=("cpu", "memory_mb"), nodes=nodes, policy="tsf", policy_name="tsf", time_scale=1.0,
        heartbeat_interval=args.interval, nm_expiry=10,
        state_dir=tempfile.mkdtemp(prefix="bench-rm-state-") if args.journal else None)
    hosts = [NodeManagerHost.options(scheduling_strategy=Affinity(rid, soft=False)).remote(
        f"nm-{i}", rm, specs, rid, interval_wall=args.interval) for i, (rid, specs) in enumerate(groups)]
    t_reg = time.time()
    ray.get([h.register.remote() for h in hosts])
    print(f"{args.nms} NMs on {len(hosts)} host(s) over {len(ray_nodes)} Ray node(s); "
          f"registered in {time.time() - t_reg:.2f}s")
    ray.get(rm.call.remote(Call.START_CLOCK, TraceClock(time.time(), 1.0)))
    time.sleep(args.warmup)
    ray.get([h.reset_measurements.remote() for h in hosts])
    before = ray.get(rm.progress.remote())["heartbeats"]
    t0 = time.time()
    time.sleep(args.seconds)
    after = ray.get(rm.progress.remote())
    elapsed = time.time() - t0
    stats = ray.get([h.stop.remote() for h in hosts])

    handled = (after["heartbeats"] - before) / elapsed
    offered = args.nms / args.interval
    rtt = np.array([x for s in stats for x in s["rtt"]]) * 1000
    lag = np.array([x for s in stats for x in s["lag"]]) * 1000
    batches = sum(s["batches"] for s in stats)
    print(f"heartbeats handled   {handled:9.1f}/s of {offered:.0f}/s offered ({100 * handled / offered:.2f}%)")
    print(f"RM calls             {after['calls']} total; {batches / elapsed:.1f} heartbeat batches/s, "
          f"{(after['heartbeats'] - before) / max(1, batches):.0f} NMs per batch")
    print(f"backlog              max {max(s['backlog_max'] for s in stats)} NMs, "
          f"mean {sum(s['backlog_sum'] for s in stats) / max(1, batches):.2f} per batch; "
          f"NMs lost to expiry: {args.nms - after['nodes_alive']}")
    print(f"batch round trip     p50 {np.percentile(rtt, 50):.2f} ms  p99 {np.percentile(rtt, 99):.2f} ms  "
          f"max {rtt.max():.2f} ms")
    print(f"NM due -> answered   p50 {np.percentile(lag, 50):.2f} ms  p99 {np.percentile(lag, 99):.2f} ms  "
          f"max {lag.max():.2f} ms")
    for a in [rm, *hosts]:
        ray.kill(a)
    if started:
        ray.shutdown()


if __name__ == "__main__":
    main()
