"""The ResourceManager's own throughput: allocations per second, and its CPU per allocation
against the simulator's CPU per task on the same workload.

The RM actor is the replay's own, made as a replay makes it (``rayrm.rm.runtime.driver``:
journal and snapshots on, the replay's heartbeat interval, expiries and policy), and it is
driven by the replay's own NodeManager and ApplicationMaster hosts, each in its own
process, speaking the protocol through ``RMClient``.  No container runs: the hosts use the
``actor`` executor with the ``sleep`` payload, so a container is a timer inside its NM
host that "finishes" after the task's duration × time scale, without a Ray task or a
process.  What the machine spends beyond the RM is the hosts' protocol work.

Workloads: the paper-scale Google-like trace (``rayrm trace generate google --nodes 1000
--jobs 4500 --tasks 180000 --seed 7 --max-duration 7200``) and the same generator at
10,000 nodes with the same 4,500 jobs and 180,000 tasks (``--nodes 1000,10000``).  The
generator keeps the offered load at 1 (CPU work / cluster cores × the hour of arrivals),
so on ten times the nodes the tasks run ten times longer (up to ``--max-duration``):
the allocations are the same, the NMs heartbeating ten times as many.  ``--config``
measures a config of one's own instead.

Each (nodes, time scale) pair is one replay, up to trace time ``--until`` (default the
first 1,800 s of the trace, the busiest part; ``--until 0``: the whole trace), and one
``rayrm simulate`` of the same config, seed, policy and ``--until`` in a subprocess.
One row each:

* allocations: containers the RM allocated that ran (the run log's task attempts; without
  faults, every task of the trace once over a whole run), and per wall second;
* NM heartbeats handled by the RM per wall second (idle ones included);
* kept pace: the replay's own verdict (summary.json ``pace.kept_pace``, at most 5% of the
  RM's monitor ticks more than one heartbeat interval behind) and the share behind;
* RM cores: the RM actor's CPU seconds / wall seconds (near 1: the RM is the bottleneck);
* RM CPU ms per allocation: the RM actor's CPU seconds (its own ``getrusage``, summary.json
  ``rm.cpu_seconds``: start-up, registration and the journal included) / allocations;
* sim CPU µs per task: the simulator's whole-process CPU (the child's ``wait4`` usage:
  start-up, trace loading and writing the run directory included) / its task attempts;
* ratio: RM CPU per allocation / sim CPU per task (the goal is at most 5).

With ``--paced`` each row also runs the simulator paced as that replay's RM worked: in
bursts of the RM's CPU per call, stopped in between (SIGSTOP, SIGCONT) so that it is busy
the RM's share of the wall time (its "RM cores"), and sets the RM against that:

* paced sim CPU us/task: the simulator's whole-process CPU per task, so paced;
* ratio to paced: RM CPU per allocation / paced sim CPU per task.  A CPU back from idle has
  lost its caches and predictors, so work done in bursts costs more than the same work done
  flat out (``bench_paced.py``); this ratio sets the two at the same pace.

The rows go to ``--out DIR/rows.json`` and the table is printed.  A replay longer than
~30 s runs under the shared lock::

    flock /tmp/rayrm-heavy.lock timeout 1800 python benchmarks/bench_rm_throughput.py \\
        [--nodes 1000,10000] [--time-scales 0.02] [--until 1800] [--paced] [--out DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rayrm.rm.core.config import load_config
from rayrm.rm.runtime.driver import replay

COLUMNS = ("NMs", "tasks", "time scale", "beat ms", "until", "wall s", "allocations", "alloc/s", "NM beats/s",
           "kept pace (behind)", "RM cores", "RM CPU ms/alloc", "sim CPU us/task", "ratio",
           "paced sim CPU us/task", "ratio to paced")
JOBS, TASKS, SEED = 4500, 180_000, 7


def trace(out: Path, nodes: int, max_duration: float) -> Path:
    """The Google-like trace at ``nodes`` machines with the paper's 4,500 jobs and 180,000
    tasks, seed 7 (``rayrm trace generate google``), written once under ``out``."""
    from rayrm.traces.google_workload import write_google  # noqa: PLC0415
    path = out / f"google-{nodes}.yaml"
    if not path.exists():
        write_google(path, nodes, JOBS, TASKS, SEED, max_duration=max_duration)
    return path


def task_attempts(summary: dict) -> int:
    """Containers that ran (or run at the end): the run log's task attempts of every status."""
    return int(sum((summary.get("tasks") or {}).values()))


def measure_replay(config: Path, policy: str, scale: float, until: float | None, out: Path,
                   beat: float | None = None) -> dict:
    """One replay of ``config`` with no container run (module docstring); its run directory
    goes to ``out`` (the RM's journal and snapshots, under ``out/rm-state``, are removed).
    ``beat``: the NM heartbeat interval in trace seconds instead of the config's."""
    cfg = load_config(config)
    if beat:
        cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, heartbeat_interval=beat))
    t0 = time.time()
    summary = replay(cfg, policy=policy, out=out, time_scale=scale, executor="actor", payload="sleep",
                     until=until, progress=False)
    shutil.rmtree(out / "rm-state", ignore_errors=True)
    if not (summary.get("rm") or {}).get("cpu_seconds"):
        print(f"warning: the RM's CPU was not measured ({summary.get('interrupt_reason', '')})", file=sys.stderr)
    wall = summary.get("wall_seconds") or (time.time() - t0)
    pace, rm = summary.get("pace") or {}, summary.get("rm") or {}
    return {"nodes": len(cfg.nodes), "trace_tasks": sum(j.app.num_tasks for j in cfg.jobs),
            "time_scale": scale, "beat_wall_ms": 1000 * cfg.run.heartbeat_interval * scale, "until": until, "wall_s": wall, "allocations": task_attempts(summary),
            "heartbeats": (summary.get("node_heartbeats") or {}).get("handled", 0),
            "kept_pace": pace.get("kept_pace"), "behind_fraction": pace.get("behind_fraction"),
            "rm_cpu_s": rm.get("cpu_seconds", 0.0), "rm_calls": summary.get("rm_calls", 0),
            "interrupted": bool(summary.get("interrupted")),
            "tasks_finished_twice": summary.get("tasks_finished_twice", 0)}


def child_cpu(cmd: list[str], burst: float = 0.0, duty: float = 1.0) -> float:
    """CPU seconds (user + system) of ``cmd`` run to its end in a child process: flat out when
    ``burst`` is 0, else paced — let run ``burst`` wall seconds at a time and stopped
    (SIGSTOP) in between, so that it runs ``duty`` of the wall time, as a replay's RM does."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    pause = burst * (1.0 / duty - 1.0) if burst else 0.0
    while True:
        if burst:
            time.sleep(burst)
            os.kill(proc.pid, signal.SIGSTOP)
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG if burst else 0)
        if pid:
            break
        time.sleep(pause)
        os.kill(proc.pid, signal.SIGCONT)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    return usage.ru_utime + usage.ru_stime


def sim_command(config: Path, policy: str, until: float | None, out: Path) -> list[str]:
    """``rayrm simulate`` of ``config`` into ``out``, as this benchmark runs it."""
    cmd = [sys.executable, "-m", "rayrm.rm.cli.main", "simulate", str(config), "--policy", policy,
           "--out", str(out), "--no-progress"]
    return cmd + (["--until", f"{until:g}"] if until else [])


def measure_sim(config: Path, policy: str, until: float | None, out: Path) -> dict:
    """``rayrm simulate`` of ``config`` in a subprocess: its CPU seconds (user + system, the
    whole process) and task attempts."""
    cpu = child_cpu(sim_command(config, policy, until, out))
    summary = json.loads((out / "summary.json").read_text())
    return {"sim_cpu_s": cpu, "sim_tasks": task_attempts(summary)}


def measure_paced_sim(config: Path, policy: str, until: float | None, out: Path, r: dict) -> dict:
    """The simulator paced as the replay of row ``r`` ran its RM (``--paced``): bursts of the
    RM's CPU per call, busy the RM's share of the wall time."""
    burst = r["rm_cpu_s"] / max(r["rm_calls"], 1)
    duty = min(max(r["rm_cpu_s"] / max(r["wall_s"], 1e-9), 0.01), 0.99)
    return {"sim_paced_cpu_s": child_cpu(sim_command(config, policy, until, out), burst, duty)}


def figures(r: dict) -> dict:
    """The derived columns of one row: rates, CPU per allocation and per task, their ratio."""
    wall = max(r["wall_s"], 1e-9)
    rm_ms = 1000.0 * r["rm_cpu_s"] / r["allocations"] if r["allocations"] else math.nan
    sim_us = 1e6 * r["sim_cpu_s"] / r["sim_tasks"] if r["sim_tasks"] else math.nan
    out = {"alloc_per_s": r["allocations"] / wall, "heartbeats_per_s": r["heartbeats"] / wall,
           "rm_cores": r["rm_cpu_s"] / wall,
           "rm_cpu_ms_per_alloc": rm_ms, "sim_cpu_us_per_task": sim_us, "ratio": 1000.0 * rm_ms / sim_us}
    if r.get("sim_paced_cpu_s") and r["sim_tasks"]:
        paced_us = 1e6 * r["sim_paced_cpu_s"] / r["sim_tasks"]
        out |= {"sim_paced_us_per_task": paced_us, "ratio_to_paced": 1000.0 * rm_ms / paced_us}
    return out


def cells(r: dict) -> tuple:
    behind = r["behind_fraction"]
    pace = f"{r['kept_pace']} ({behind:.1%})" if behind is not None else str(r["kept_pace"])
    return (str(r["nodes"]), str(r["trace_tasks"]), f"{r['time_scale']:g}", f"{r['beat_wall_ms']:g}",
            f"{r['until']:g}" if r["until"] else "end", f"{r['wall_s']:.0f}", str(r["allocations"]),
            f"{r['alloc_per_s']:.0f}", f"{r['heartbeats_per_s']:.0f}", pace, f"{r['rm_cores']:.2f}",
            f"{r['rm_cpu_ms_per_alloc']:.3f}", f"{r['sim_cpu_us_per_task']:.1f}", f"{r['ratio']:.1f}",
            f"{r['sim_paced_us_per_task']:.1f}" if "sim_paced_us_per_task" in r else "-",
            f"{r['ratio_to_paced']:.1f}" if "ratio_to_paced" in r else "-")


def table(rows: list[dict]) -> str:
    body = [cells(r) for r in rows]
    widths = [max(len(c), *(len(b[i]) for b in body)) for i, c in enumerate(COLUMNS)]
    line = lambda cs: "| " + " | ".join(c.ljust(w) for c, w in zip(cs, widths)) + " |"  # noqa: E731
    return "\n".join([line(COLUMNS), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, body)])


def run(configs: list[Path], scales: list[float], until: float | None, policy: str, out: Path,
        beat: float | None = None, paced: bool = False) -> list[dict]:
    """One row per (config, time scale): the replay, then the simulator on the same workload
    (once per config and ``until``: it has no time scale; ``paced``: and once per row, paced
    as that row's RM worked)."""
    rows, sims = [], {}
    for config in configs:
        for scale in scales:
            r = measure_replay(config, policy, scale, until, out / f"replay-{config.stem}-{scale:g}", beat)
            if config not in sims:
                sims[config] = measure_sim(config, policy, until, out / f"sim-{config.stem}")
            r |= sims[config]
            if paced:
                r |= measure_paced_sim(config, policy, until, out / f"sim-{config.stem}-paced-{scale:g}", r)
            r |= figures(r)
            rows.append(r)
            print(table(rows[-1:]), flush=True)
            (out / "rows.json").write_text(json.dumps(rows, indent=1) + "\n")
    return rows


def positive_list(ap: argparse.ArgumentParser, option: str, text: str, kind=float) -> list:
    """A comma-separated list of positive numbers; anything else is one line and exit 2."""
    try:
        values = [kind(x) for x in text.split(",")]
    except ValueError:
        values = []
    if not values or not all(v > 0 for v in values):
        ap.error(f"{option} must be positive numbers separated by commas, got {text!r}")
    return values


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="1000,10000", help="generated traces' node counts (comma-separated)")
    ap.add_argument("--config", help="measure this config instead of the generated traces")
    ap.add_argument("--time-scales", default="0.02", help="wall seconds per trace second (comma-separated)")
    ap.add_argument("--until", type=float, default=1800.0,
                    help="trace seconds replayed and simulated (0: the whole trace)")
    ap.add_argument("--heartbeat-interval", type=float,
                    help="NM heartbeat interval, trace seconds (default: the config's run.heartbeat_interval)")
    ap.add_argument("--max-duration", type=float, default=7200.0, help="generated tasks' longest duration")
    ap.add_argument("--policy", default="tsf")
    ap.add_argument("--paced", action="store_true",
                    help="also run the simulator paced as each replay's RM worked (ratio to paced)")
    ap.add_argument("--out", help="traces, the simulator's run directories and rows.json (default: a "
                                  "temporary directory)")
    args = ap.parse_args()
    nodes = positive_list(ap, "--nodes", args.nodes, int)
    scales = positive_list(ap, "--time-scales", args.time_scales)
    out = Path(args.out or tempfile.mkdtemp(prefix="rayrm-rm-throughput-"))
    out.mkdir(parents=True, exist_ok=True)
    configs = [Path(args.config)] if args.config else [trace(out, n, args.max_duration) for n in nodes]
    rows = run(configs, scales, args.until or None, args.policy, out, args.heartbeat_interval, args.paced)
    print()
    print(table(rows))
    print(f"\nrows: {out / 'rows.json'}")


if __name__ == "__main__":
    main()
