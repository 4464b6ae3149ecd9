"""What the live web UI costs a replay: the paper-scale replay with the UI off, and on
under 20 requests a second across the REST API.

The trace is bench_replay_scale.py's (``rayrm trace generate google``: 1,000 nodes,
4,500 jobs, 180,000 tasks, seed 7), replayed under TSF at time scale 0.02 without a
twin.  Replays alternate off, on, off, on, ... ``--repeats`` times each.  With the UI on,
a separate process (this script with ``--load URL``) sends ``--rate`` GET requests a
second, round-robin over YARN's endpoints (``/ws/v1/cluster/...``: info, metrics,
scheduler, apps, one app, its attempts, nodes, one node) and rayrm's (overview,
history, shares, apps, nodes, pending), from the moment the URL answers until the
replay ends.  Printed per mode: the RM actor's CPU seconds per 1,000 allocations and
the RM's lag p99 (wall s), least of the repeats (all of them in brackets), and the
ratio on / off.  The goal: both within 2%.

    flock /tmp/rayrm-heavy.lock timeout 7200 python benchmarks/bench_ui_overhead.py [--repeats 3]
    python benchmarks/bench_ui_overhead.py --config configs/paper-micro.yaml --time-scale 0.05 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from bench_replay_scale import trace

from rayrm.rm.core.config import load_config
from rayrm.rm.runtime.driver import replay
from rayrm.rm.ui.server import UISettings

PATHS = ["ws/v1/cluster/info", "ws/v1/cluster/metrics", "ws/v1/cluster/scheduler", "ws/v1/cluster/apps?limit=200",
         "ws/v1/cluster/apps/{app}", "ws/v1/cluster/apps/{app}/appattempts", "ws/v1/cluster/nodes?limit=200",
         "ws/v1/cluster/nodes/{node}", "ws/v1/rayrm/overview", "ws/v1/rayrm/history", "ws/v1/rayrm/shares",
         "ws/v1/rayrm/apps", "ws/v1/rayrm/nodes", "ws/v1/rayrm/pending"]


def load(url: str, rate: float, app: str, node: str, wait_up: float = 300.0) -> None:
    """``--load``: GET the endpoints in turn, ``rate`` a second on a fixed schedule, from
    when the server first answers (within ``wait_up`` seconds: the replay starts Ray
    first) until it goes away; prints the requests answered, refused and failed as JSON."""
    paths = [p.format(app=app, node=node) for p in PATHS]
    counts = {"ok": 0, "http_error": 0, "failed": 0}
    start, k, misses, up = time.monotonic(), 0, 0, False
    while misses < 20 and (up or time.monotonic() - start < wait_up):
        try:
            urllib.request.urlopen(url + paths[k % len(paths)], timeout=10).read()
            counts["ok"] += 1
            misses, up = 0, True
        except urllib.error.HTTPError:
            counts["http_error"] += 1
            up = True
        except OSError:
            if up:
                counts["failed"] += 1
                misses += 1
        k += 1
        time.sleep(max(0.0, start + k / rate - time.monotonic()))
    print(json.dumps(counts), flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one(cfg, scale: float, out: Path, ui: bool, rate: float) -> dict:
    """One replay; with ``ui``, served and loaded (see the module docstring)."""
    settings = UISettings("127.0.0.1", _free_port()) if ui else None
    loader = None
    if ui:
        url = f"http://127.0.0.1:{settings.port}/"
        loader = subprocess.Popen([sys.executable, __file__, "--load", url, "--rate", str(rate),
                                   "--app", cfg.jobs[0].app.app_id, "--node", cfg.nodes[0].name],
                                  stdout=subprocess.PIPE, text=True)
    summary = replay(cfg, policy="tsf", out=out, time_scale=scale, progress=False, ui=settings)
    served = {}
    if loader is not None:
        try:
            served = json.loads(loader.communicate(timeout=120)[0] or "{}")
        except subprocess.TimeoutExpired:
            loader.kill()
    pace, rm = summary.get("pace", {}), summary.get("rm", {})
    return {"cpu": rm.get("cpu_seconds_per_1000_allocations", float("nan")),
            "lag": pace.get("lag_wall_s", {}).get("p99", float("nan")),
            "wall": summary.get("wall_seconds") or 0.0, "served": served}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", help="a trace to replay instead of the generated paper-scale one")
    ap.add_argument("--time-scale", type=float, default=0.02)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rate", type=float, default=20.0, help="requests a second with the UI on")
    ap.add_argument("--out", help="keep the run directories here (default: a temporary directory)")
    ap.add_argument("--load", metavar="URL", help=argparse.SUPPRESS)
    ap.add_argument("--app", help=argparse.SUPPRESS)
    ap.add_argument("--node", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.load:
        load(args.load, args.rate, args.app, args.node)
        return
    out = Path(args.out or tempfile.mkdtemp(prefix="rayrm-ui-overhead-"))
    out.mkdir(parents=True, exist_ok=True)
    cfg = load_config(args.config or trace(out, 7200.0))
    runs: dict[str, list[dict]] = {"off": [], "on": []}
    for i in range(args.repeats):
        for mode in ("off", "on"):
            r = one(cfg, args.time_scale, out / f"{mode}-{i}", mode == "on", args.rate)
            runs[mode].append(r)
            print(f"{mode} #{i + 1}: RM CPU s / 1k alloc {r['cpu']:.3f}, lag p99 {r['lag']:.4f} s, "
                  f"wall {r['wall']:.0f} s {r['served'] or ''}", flush=True)
    print()
    print(table(runs, args.time_scale, args.rate))


def table(runs: dict[str, list[dict]], scale: float, rate: float) -> str:
    best = {m: {k: min(r[k] for r in rs) for k in ("cpu", "lag")} for m, rs in runs.items()}
    lines = [f"time scale {scale:g}, UI on = {rate:g} requests/s; least of {len(runs['off'])} (all)",
             "| UI | RM CPU s / 1k alloc | lag p99 s |", "|---|---|---|"]
    for m in ("off", "on"):
        cpus = ", ".join(f"{r['cpu']:.3f}" for r in runs[m])
        lags = ", ".join(f"{r['lag']:.4f}" for r in runs[m])
        lines.append(f"| {m} | {best[m]['cpu']:.3f} ({cpus}) | {best[m]['lag']:.4f} ({lags}) |")
    lines.append(f"| on / off | {best['on']['cpu'] / best['off']['cpu']:.3f} | "
                 f"{best['on']['lag'] / best['off']['lag']:.3f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
