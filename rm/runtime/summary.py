"""What a replay's summary.json adds to the run log's own figures, and its twin.

``replay_figures`` gathers the measurements only a replay has — scheduling latencies, NM
heartbeats, pace, the RM actor's costs, the faults injected — from what the RM exported
and what the supervisor saw.  ``twin_comparison`` simulates the same trace and seed and
sets each job's completion time against the simulator's.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rayrm.rm.core.config import ExperimentConfig
from rayrm.rm.runs.metrics import percentiles
from rayrm.rm.runtime.pace import pace_summary
from rayrm.rm.sim.engine import simulate


def scaled(values, scale: float) -> dict:
    """``runs.metrics.percentiles`` of ``values`` × ``scale``, rounded, with their count ``n``."""
    if len(values) == 0:
        return {}
    return {k: round(v * scale, 3) for k, v in percentiles(values).items()} | {"n": len(values)}


def replay_figures(exported: dict, outcome: dict, host_stats: list, *, scale: float,
                   wall_seconds: float) -> dict:
    """summary.json's replay-only figures: latencies (wall ms and trace s), NM heartbeats,
    tasks finished twice, refused and total RM calls, the channel's refusals (since the RM's
    last start, ``ChannelServer.stats``), pace and the RM's costs."""
    rtt = [x for s in host_stats for x in s["rtt"]]
    lag = [x for s in host_stats for x in s["lag"]]
    a2r = exported["alloc_to_running"]
    out = {
        "scheduling_latency": {
            "allocation_to_running_ms": scaled(a2r, 1000.0),
            "allocation_to_launch_ms": scaled(exported["alloc_to_launch"], 1000.0),
            "allocation_to_running_trace_s": scaled(a2r, 1.0 / scale),
        },
        "node_heartbeats": {
            "handled": exported["progress"]["heartbeats"],
            "batch_round_trip_ms": scaled(rtt, 1000.0),
            "due_to_answer_ms": scaled(lag, 1000.0),
            "out_of_band": sum(s["oob"] for s in host_stats),
        },
        "tasks_finished_twice": exported["progress"]["duplicate_finishes"]
        + sum(a["duplicates"] for a in outcome["apps"].values()),
        "refused_calls": exported["progress"]["refused"],
        "channel": exported.get("channel", {}),
        "rm_calls": exported["calls"],
        "pace": pace_summary(exported["pace"], time_scale=scale, delivery=outcome.get("delivery", ()),
                             launch=exported["alloc_to_launch"], cpu_seconds=exported["cpu_seconds"],
                             wall_seconds=wall_seconds),
        "rm": rm_costs(exported),
    }
    if exported.get("preemption") is not None:
        out["preemption"] = exported["preemption_summary"]         # as the simulator's
        out["preemption_protocol"] = preemption_protocol(exported["preemption"], outcome, host_stats)
    return out


def preemption_protocol(counts: dict, outcome: dict, host_stats: list) -> dict:
    """How the replay's preemptions went (summary.json ``preemption_protocol``): containers the
    RM preempted (killed at their deadline) and spared (finished first), the preemption
    messages the AMs received, and the kills the NM hosts carried out (each container once;
    their count includes the other cleanups, of apps ended or attempts failed)."""
    return {"preempted": counts["preempted"], "spared": counts["spared"], "warned_now": counts["warned"],
            "by_queue": counts["queues"], "am_messages": len(outcome.get("warned", ())),
            "nm_kills": sum(s.get("killed", 0) for s in host_stats)}


def rm_costs(exported: dict) -> dict:
    """The RM actor's CPU, memory and state-store costs (summary.json ``rm``)."""
    allocations = exported["progress"]["allocations"]
    snaps = exported["snapshots"]
    return {"cpu_seconds": round(exported["cpu_seconds"], 2),
            "cpu_seconds_per_1000_allocations": round(1000 * exported["cpu_seconds"] / max(1, allocations), 3),
            "peak_rss_mb": round(exported["peak_rss_mb"], 1),
            "snapshots": len(snaps), "snapshot_max_mb": round(max((b for b, _ in snaps), default=0) / 2**20, 2),
            "snapshot_max_s": round(max((t for _, t in snaps), default=0.0), 3),
            "snapshot_total_s": round(sum(t for _, t in snaps), 3),
            "snapshot_loop_blocked_max_s": round(max(exported.get("snapshot_blocked") or [0.0]), 4),
            "journal_mb": round(exported["journal_bytes"] / 2**20, 2),
            "journal_written_mb": round(exported.get("journal_written", 0) / 2**20, 2),
            "restores": exported.get("recoveries", [])}


def twin_comparison(cfg: ExperimentConfig, policy: str, seed: int, out, summary: dict,
                    spread_runs: int = 10, faults=()) -> dict:
    """Simulate the same trace and seed; per-job completion time ratio replay / simulator.

    With launch jitter U(0, 2 × the replay's median allocation-to-running latency, in
    trace seconds), ``spread_runs`` jittered simulations give each job's range of completion
    times (``rayrm.rm.sim.sensitivity``), also as ratios to the exact simulation: how far the
    replay may stray from the order of events alone.  ``ratio_to_median`` compares the
    replay with the median of those runs, a reference that does not hang on one order.
    ``faults``: the replay's ``--fault`` specs; the simulator models them besides the
    config's own (``rayrm.rm.sim.faults``).
    """
    from rayrm.rm.runs.reader import RunDir  # noqa: PLC0415
    from rayrm.rm.sim.sensitivity import completion_spread  # noqa: PLC0415
    for hosts in ("am_hosts", "nm_hosts"):     # the simulator deals apps and NMs as the replay did
        if summary.get(hosts):
            cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, **{hosts: int(summary[hosts])}))
    twin_dir = Path(out) / "twin"
    twin = simulate(cfg, policy=policy, seed=seed, out=twin_dir, progress=False, faults=faults)
    mine = RunDir(Path(out)).jobs.set_index("app")
    sim = RunDir(twin_dir).jobs.set_index("app")
    ratios, replayed = {}, {}
    for app in sim.index:
        if app not in mine.index:
            continue
        a, b = float(mine.at[app, "completion_time"]), float(sim.at[app, "completion_time"])
        if a == a and b == b and b > 0:            # both finished (NaN otherwise)
            ratios[app] = round(a / b, 4)
            replayed[app] = a
    worst = max((abs(r - 1.0) for r in ratios.values()), default=0.0)
    result = {"run_dir": str(twin_dir), "completion_time_ratio": ratios, "max_deviation": round(worst, 4),
              "makespan_ratio": round(summary["makespan"] / max(1e-9, twin["makespan"]), 4)}
    # U(0, 2 x median) has the replay's median launch latency; the tail is left out on
    # purpose: under faults it holds containers waiting for a new AM, which the
    # simulator models as the fault itself.
    median = (summary.get("scheduling_latency") or {}).get("allocation_to_running_trace_s", {}).get("p50")
    jitter = round(2 * median, 6) if median else None
    if jitter and spread_runs > 0:
        simulated = sim["completion_time"].dropna()
        table = completion_spread(cfg, policy, seed, jitter=jitter, runs=spread_runs, faults=faults,
                                  exact={app: float(v) for app, v in simulated.items()})
        result["spread"] = {
            "launch_jitter_trace_s": jitter, "runs": spread_runs,
            "completion_time": {app: {k: round(float(v), 3) for k, v in row.items()}
                                for app, row in table.iterrows()},
            "ratio_range": {app: [round(row["min"] / row["exact"], 4), round(row["max"] / row["exact"], 4)]
                            for app, row in table.iterrows() if row["exact"] > 0},
            "ratio_to_median": {app: round(a / table.at[app, "median"], 4)
                                for app, a in replayed.items() if table.at[app, "median"] > 0}}
        # |replay − median| <= max(5% of the median, 2 heartbeat intervals): the order of events
        # alone moves a short job by a heartbeat or two, a long one by a few percent
        beat = cfg.run.heartbeat_interval
        within = [app for app, a in replayed.items()
                  if abs(a - table.at[app, "median"]) <= max(0.05 * table.at[app, "median"], 2 * beat)]
        result["within_median"] = {"jobs": len(replayed), "within": len(within),
                                   "fraction": round(len(within) / max(1, len(replayed)), 4),
                                   "tolerance": "max(5%, 2 heartbeats)"}
    return result
