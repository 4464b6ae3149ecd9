"""``rayrm check RUN_DIR...``: verify a run directory's invariants (see ``rayrm.rm.runs.check``).

Prints the counts for each run; exits 1 when any invariant is violated, 2 (one line on
stderr) when a run directory cannot be read, 0 otherwise.
"""

from __future__ import annotations


def add_arguments(parser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directory (simulate/replay --out)")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")


def run(args) -> int:
    import json  # noqa: PLC0415

    from rayrm.rm.runs.check import check_run  # noqa: PLC0415 (pandas only when used)

    results = [check_run(path) for path in args.runs]
    if args.json:
        payload = [r.as_dict() for r in results]
        print(json.dumps(payload[0] if len(payload) == 1 else payload, indent=2))
    else:
        print("\n".join(r.report() for r in results))
    return 0 if all(r.ok for r in results) else 1
