"""``rayrm offline CONFIG [--policy P] [--resource R] [--json]``: progressive filling, divisible tasks.

Solves the config's initial cluster and all its jobs at once (submit times are
ignored; every job is capped at its own number of tasks) with offline
progressive filling (tsf-paper Algorithm 1, ``rm/offline/filling.py``).  The policy is
the config's unless ``--policy`` names another; online names map to their
offline form (cmmf-cpu → cmmf on cpu, drfh-ff/drfh-bf → drfh).

``--json`` prints ``{"policy": P, "apps": {APP: {"tasks": x, "share": s,
"per_node": {NODE: x}}}}``; otherwise a table of app, tasks, share, nodes used.
"""

from __future__ import annotations

import argparse
import json
import sys

from rayrm.rm.core.config import load_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", metavar="CONFIG", help="experiment config (YAML)")
    parser.add_argument("--policy", help="tsf, cdrf, drfh, cmmf, pm-drf or drf "
                        "(online names too: cmmf-cpu, cmmf-mem, drfh-ff, drfh-bf); default: the config's")
    parser.add_argument("--resource", help="the resource cmmf shares (default cpu; cmmf-mem: memory)")
    parser.add_argument("--json", action="store_true", help="print the allocation as JSON")


def run(args: argparse.Namespace) -> int:
    # Deferred: filling imports scipy and highspy, too slow for `rayrm --help`.
    from rayrm.rm.offline.filling import Problem, progressive_filling, resolve_policy  # noqa: PLC0415

    config = load_config(args.config)
    policy, resource = resolve_policy(args.policy or config.policy, args.resource)
    problem = Problem.from_config(config)
    if policy == "drf" and not problem.eligible.all():
        print("rayrm offline: note: drf pools the cluster into one machine and ignores constraints",
              file=sys.stderr)
    alloc = progressive_filling(problem, policy, resource=resource)
    result = alloc.as_dict()
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    label = f"{policy} on {resource}" if resource else policy
    print(f"offline {label}: {len(problem.app_ids)} apps on {len(problem.node_names)} nodes, "
          f"{alloc.rounds} round(s) of progressive filling (divisible tasks)")
    width = max([3] + [len(a) for a in result["apps"]])
    print(f"{'app':<{width}}  {'tasks':>12}  {'share':>10}  nodes used")
    for app, row in result["apps"].items():
        used = "pooled" if policy == "drf" else str(len(row["per_node"]))
        print(f"{app:<{width}}  {row['tasks']:12.4f}  {row['share']:10.6f}  {used}")
    return 0
