"""``rayrm offline CONFIG [--policy P] [--resource R] [--json]``: progressive filling, divisible tasks.

Solves the config's initial cluster and all its jobs at once (submit times are
ignored; every job is capped at its own number of tasks) with offline
progressive filling (tsf-paper Algorithm 1, ``rm/offline/filling.py``).  The policy is
the config's unless ``--policy`` names another: any policy spec, plugins included, whose
share grows with its tasks (the solver asks the policy for its share of one task);
``drfh`` and ``cmmf`` are the offline names of drfh-ff and cmmf-cpu.

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
    parser.add_argument("--policy", help="a policy spec: tsf, cdrf, drfh, cmmf, pm-drf, drf, cmmf-mem, "
                        "path/to/file.py:Class, ... (docs/policies.md); default: the config's")
    parser.add_argument("--resource", help="the resource cmmf shares (default cpu; cmmf-mem: memory)")
    parser.add_argument("--json", action="store_true", help="print the allocation as JSON")


def run(args: argparse.Namespace) -> int:
    # Deferred: filling imports scipy and highspy, too slow for `rayrm --help`.
    from rayrm.rm.offline.filling import Problem, progressive_filling  # noqa: PLC0415
    from rayrm.rm.offline.views import offline_policy  # noqa: PLC0415

    config = load_config(args.config)
    spec = args.policy or config.policy
    policy = offline_policy(spec, args.resource)
    problem = Problem.from_config(config)
    if policy.pooled and not problem.eligible.all():
        print(f"rayrm offline: note: {spec} pools the cluster into one machine and ignores constraints",
              file=sys.stderr)
    alloc = progressive_filling(problem, spec, resource=args.resource)
    result = alloc.as_dict()
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"offline {spec} ({policy.share_kind().title}): {len(problem.app_ids)} apps on "
          f"{len(problem.node_names)} nodes, {alloc.rounds} round(s) of progressive filling (divisible tasks)")
    width = max([3] + [len(a) for a in result["apps"]])
    print(f"{'app':<{width}}  {'tasks':>12}  {'share':>10}  nodes used")
    for app, row in result["apps"].items():
        used = "pooled" if alloc.pooled else str(len(row["per_node"]))
        print(f"{app:<{width}}  {row['tasks']:12.4f}  {row['share']:10.6f}  {used}")
    return 0
