"""Where the machine's CPU goes during a replay: CPU seconds per process, sampled from /proc.

Run beside a replay (it stops when ``--until-pid`` exits, or after ``--seconds``)::

    python benchmarks/cpu_accounting.py --until-pid PID --out cpu.json [--py-spy DIR --py-spy-at 60]

Every ``--every`` seconds it reads every process's user + system CPU time (psutil) and
its title (Ray renames a worker ``ray::ResourceManager``, ``ray::NodeManagerHost`` ...
once it holds an actor).  At the end it prints, per role (RM actor, NM host, AM host,
container executors and idle workers, raylet, GCS, driver, other), the CPU seconds
spent while it watched and their share of the machine's cores × wall seconds.
With ``--py-spy DIR`` it also records (``py-spy record --nonblocking``) the RM actor,
the first NM host and the first AM host for ``--py-spy-seconds`` starting
``--py-spy-at`` seconds in.  ``series`` in the output has the cumulative figures every
sample, to split a long run (``bench_replay_scale.py``'s time scales) by wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
import sys
from collections import defaultdict

try:
    import psutil
except ImportError:       # not a rayrm dependency: only this script reads per-process CPU
    sys.exit("cpu_accounting.py needs psutil, which rayrm does not install: pip install psutil")

ROLES = (("ray::ResourceManager", "RM actor"), ("ray::NodeManagerHost", "NM host"),
         ("ray::ApplicationMasterHost", "AM host"), ("ray::ContainerExecutor", "container executor"),
         ("ray::run_container", "container task"), ("raylet", "raylet"), ("gcs_server", "GCS"),
         ("rayrm", "driver"), ("bench_replay_scale", "driver"), ("ray::IDLE", "idle worker"),
         ("default_worker", "idle worker"), ("py-spy", "py-spy"), ("cpu_accounting", "this sampler"))


def role(title: str) -> str:
    for key, name in ROLES:
        if key in title:
            return name
    return "other"


def title_of(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())[:200] or p.name()
    except (psutil.Error, OSError):
        return ""


def start_py_spy(titles: dict[int, str], out_dir: str, seconds: float) -> None:
    """One py-spy recording (raw flame graph, ``seconds`` long) of the first RM actor, NM
    host and AM host process found, each to ``out_dir/<role>.txt``."""
    os.makedirs(out_dir, exist_ok=True)
    picks = {}
    for pid, t in titles.items():
        r = role(t)
        if r in ("RM actor", "NM host", "AM host") and r not in picks and psutil.pid_exists(pid):
            picks[r] = pid
    for r, pid in picks.items():
        name = r.replace(" ", "_")
        subprocess.Popen(["py-spy", "record", "--nonblocking", "-r", "50", "-d", str(int(seconds)),
                          "-p", str(pid), "-f", "raw", "-o", f"{out_dir}/{name}.txt"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--until-pid", type=int)
    ap.add_argument("--seconds", type=float, default=3600)
    ap.add_argument("--every", type=float, default=2.0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--py-spy", help="directory for py-spy flame graphs")
    ap.add_argument("--py-spy-at", type=float, default=60.0)
    ap.add_argument("--py-spy-seconds", type=float, default=30.0)
    args = ap.parse_args()
    first: dict[int, float] = {}
    last: dict[int, float] = {}
    titles: dict[int, str] = {}
    t0 = time.time()
    cpu0 = psutil.cpu_times()
    spied = False
    series = []
    first_pass = True
    while time.time() - t0 < args.seconds:
        if args.until_pid and not psutil.pid_exists(args.until_pid):
            break
        for p in psutil.process_iter():
            try:
                ct = p.cpu_times()
            except (psutil.Error, OSError):
                continue
            used = ct.user + ct.system
            if p.pid not in first:
                # a process started after the sampler began counts from zero
                first[p.pid] = used if first_pass else 0.0
            last[p.pid] = used
            t = title_of(p)
            if t and (p.pid not in titles or titles[p.pid] != t):
                titles[p.pid] = t
        first_pass = False
        busy = psutil.cpu_times()
        by_role: dict[str, float] = defaultdict(float)
        for pid, used in last.items():
            by_role[role(titles.get(pid, ""))] += used - first.get(pid, 0.0)
        series.append((round(time.time(), 1), round(sum(busy[:3]) - sum(cpu0[:3]), 1),
                       {k: round(v, 1) for k, v in by_role.items()}))
        if args.py_spy and not spied and time.time() - t0 >= args.py_spy_at:
            spied = True
            start_py_spy(titles, args.py_spy, args.py_spy_seconds)
        time.sleep(args.every)
    wall = time.time() - t0
    cpu1 = psutil.cpu_times()
    per_role: dict[str, float] = defaultdict(float)
    per_proc = []
    for pid, used in last.items():
        d = used - first.get(pid, 0.0)
        if d <= 0.01:
            continue
        r = role(titles.get(pid, ""))
        per_role[r] += d
        per_proc.append((round(d, 1), r, pid, titles.get(pid, "")[:100]))
    per_proc.sort(reverse=True)
    cores = psutil.cpu_count()
    machine = {"user": cpu1.user - cpu0.user, "nice": cpu1.nice - cpu0.nice, "system": cpu1.system - cpu0.system,
               "idle": cpu1.idle - cpu0.idle, "iowait": getattr(cpu1, "iowait", 0) - getattr(cpu0, "iowait", 0),
               "softirq": getattr(cpu1, "softirq", 0) - getattr(cpu0, "softirq", 0)}
    result = {"wall_s": round(wall, 1), "cores": cores, "machine_cpu_s": {k: round(v, 1) for k, v in machine.items()},
              "per_role_cpu_s": {k: round(v, 1) for k, v in sorted(per_role.items(), key=lambda kv: -kv[1])},
              "per_process": per_proc[:40],
              "series": series}    # (wall time, machine busy CPU s, role -> CPU s), cumulative
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=1)
    busy = machine["user"] + machine["nice"] + machine["system"]      # Ray's workers run niced
    print(f"wall {wall:.0f}s x {cores} cores = {wall * cores:.0f} core-s; busy (user+nice+sys) "
          f"{busy:.0f} s ({busy / (wall * cores):.0%})")
    for r, v in result["per_role_cpu_s"].items():
        print(f"  {r:20s} {v:8.1f} s  {v / (wall * cores):6.1%} of the machine")
    for d, r, pid, t in per_proc[:15]:
        print(f"    {d:7.1f} s  {r:18s} {pid:7d} {t}")


if __name__ == "__main__":
    main()
