"""``rayrm audit``: search offline allocations for sharing-property violations (tsf-paper Table I).

::

    rayrm audit [--json] [--instances K] [--seed S] [--policies P,...]
    rayrm audit --config CONFIG --app APP [--policies P,...] [--simulate] [--json]

The first form checks SI, SP, EF, PO, SMF and SRF (``rm/offline/audit/search.py``) for pm-drf,
drfh, cdrf, tsf, drf and cmmf on the papers' instances and K small random ones,
and prints a table (✓ with the number of checks, ✗ with the smallest
counterexample found below it).  ``--json`` prints ``{"policies": {NAME:
{PROPERTY: {"holds": ..., "tried": ..., "counterexample": ...}}}}``.

The second form asks what APP would gain by misreporting its demand or its
constraints in CONFIG, per policy (``rm/offline/audit/whatif.py``); ``--simulate``
also replays the trace for each lie the simulator can run and reports APP's
completion time.
"""

from __future__ import annotations

import argparse
import json
import sys

from rayrm.rm.core.config import load_config
from rayrm.rm.core.errors import InputError

DEFAULT_INSTANCES = 60


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--instances", type=int, default=DEFAULT_INSTANCES, metavar="K",
                        help=f"random instances besides the papers' (default {DEFAULT_INSTANCES})")
    parser.add_argument("--seed", type=int, default=1, metavar="S", help="seed of the random instances")
    parser.add_argument("--policies", metavar="P,...",
                        help="policy specs to audit, plugins too (default: pm-drf,drfh,cdrf,tsf,drf,cmmf; "
                             "with --config: pm-drf,drfh-ff,cdrf,tsf,cmmf-cpu,cmmf-mem,drf)")
    parser.add_argument("--config", metavar="CONFIG", help="what-if mode: the workload to re-solve")
    parser.add_argument("--app", metavar="APP", help="what-if mode: the job that misreports")
    parser.add_argument("--simulate", action="store_true",
                        help="what-if mode: also replay the trace in the simulator for each lie")


def run(args: argparse.Namespace) -> int:
    if args.config or args.app:
        if not (args.config and args.app):
            raise InputError("what-if mode needs both --config and --app", field="--config")
        return _what_if(args)
    if args.simulate:
        raise InputError("--simulate needs --config and --app", field="--simulate")
    if args.instances < 0:
        raise InputError(f"must be >= 0, got {args.instances}", field="--instances")
    # Deferred here and below: the audit modules import scipy and highspy (slow for `rayrm --help`).
    from rayrm.rm.offline.audit.instances import paper_instances, random_instances  # noqa: PLC0415
    from rayrm.rm.offline.audit.search import POLICIES, run_audit  # noqa: PLC0415
    from rayrm.rm.offline.views import offline_policy  # noqa: PLC0415

    policies = _policies(args.policies, POLICIES)
    for name in policies:
        offline_policy(name)                  # an InputError names the one it cannot use
    instances = paper_instances() + random_instances(args.instances, args.seed)
    result = run_audit(instances, policies)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(format_audit(result, len(instances) - args.instances, args.instances, args.seed))
    return 0


def _policies(text: str | None, default) -> tuple[str, ...]:
    """The policy specs of ``--policies`` (any spec, plugins included), or ``default``."""
    if not text:
        return tuple(default)
    return tuple(p.strip() for p in text.split(",") if p.strip())


def format_audit(result: dict, papers: int, randoms: int, seed: int) -> str:
    from rayrm.rm.offline.audit.search import PROPERTIES  # noqa: PLC0415

    policies = list(result["policies"])
    lines = [f"Property audit of offline (divisible) allocations: {papers} paper instances "
             f"+ {randoms} random (seed {seed})", ""]
    cell = lambda r: "–" if not r["tried"] else ("✓ " + str(r["tried"])) if r["holds"] else "✗"  # noqa: E731
    lines.append("property " + "".join(f"{p:>10}" for p in policies))
    for prop in PROPERTIES:
        lines.append(f"{prop:<8} " + "".join(f"{cell(result['policies'][p][prop]):>10}" for p in policies))
    lines += ["", "✓ n: no violation in n checks; ✗: violated (counterexample below); –: nothing to check.",
              "drf runs only on instances without constraints, cmmf only on one-resource instances;",
              "SMF checks one-machine instances, SRF one-resource instances.", ""]
    examples = [(p, prop, result["policies"][p][prop]["counterexample"]) for p in policies for prop in PROPERTIES
                if result["policies"][p][prop]["counterexample"]]
    if examples:
        lines.append("Counterexamples (the smallest found for each policy and property):")
    for policy, prop, ex in examples:
        lines.append(f"- {policy} {prop} on {ex['instance']} ({ex['source']}):")
        lines.append(f"    {ex['summary']}")
        machines = ", ".join(f"{m} <{c}>" for m, c in ex["machines"].items())
        users = "; ".join(f"{u} <{v['demand']}> on {' '.join(v['machines']) or 'nothing'}"
                          for u, v in ex["users"].items())
        lines.append(f"    machines: {machines}")
        lines.append(f"    users: {users}")
        lines.append(f"    violated {ex['violations']} time(s); on {', '.join(ex['found_on'])}")
    return "\n".join(lines)


def _what_if(args: argparse.Namespace) -> int:
    from rayrm.rm.offline.audit.whatif import WHATIF_POLICIES, simulate_lies, what_if  # noqa: PLC0415
    from rayrm.rm.offline.views import offline_policy  # noqa: PLC0415

    config = load_config(args.config)
    policies = tuple(p.strip() for p in (args.policies or ",".join(WHATIF_POLICIES)).split(",") if p.strip())
    for name in policies:
        offline_policy(name)                  # an InputError names the one it cannot use
    result = what_if(config, args.app, policies)
    if args.simulate:
        simulate_lies(config, args.app, result)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"What if {args.app} misreports?  {args.config}, offline divisible allocations "
          f"(each job capped at its tasks); tasks counted as ones {args.app} can really run")
    for name, row in result["policies"].items():
        verdict = (f"GAINS {row['gain']:+.4g} tasks by '{row['best_lie']}'" if row["would_gain"]
                   else "gains nothing by lying")
        sim = f", completes in {row['completion_time']:.4g} s" if row.get("completion_time") is not None else ""
        print(f"\n{name}: truthful {row['truthful_tasks']:.4g} tasks{sim} — {verdict}")
        print(f"  {'lie':<44} {'tasks':>10} {'at least':>10} {'gain':>10}" + ("  completion" if args.simulate else ""))
        for lie in row["lies"]:
            done = ""
            if args.simulate:
                done = (f"  {lie['completion_time']:.4g} s" if lie["completion_time"] is not None
                        else "  n/a (widened)" if lie["widens"] else "  unfinished")
            print(f"  {lie['lie']:<44} {lie['tasks']:>10.4g} {lie['least']:>10.4g} {lie['gain']:>+10.4g}{done}")
    for name, why in result["skipped"].items():
        print(f"\n{name}: skipped ({why})", file=sys.stderr)
    return 0
