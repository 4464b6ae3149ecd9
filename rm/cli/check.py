"""``rayrm check RUN_DIR...``: verify a run directory's invariants (see ``rayrm.rm.runs.check``).

``--restores``: also replay each journal the RM kept (``rayrm replay --keep-rm-state``)
onto its snapshot and compare with the next snapshot (``rayrm.rm.service.restores``): a
restarted RM must rebuild exactly the state the dead one had.

``--recovery``: also print, for each injected fault, how long after it the failure was
detected and the run had fully recovered, in trace and wall seconds, and the attempts it
lost (``rayrm.rm.runs.recovery``; docs/failures.md defines both times).

Prints the counts for each run; exits 1 when any invariant is violated, 2 (one line on
stderr) when a run directory cannot be read, 0 otherwise.
"""

from __future__ import annotations

from pathlib import Path

from rayrm.rm.core.errors import InputError


def add_arguments(parser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directory (simulate/replay --out)")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    parser.add_argument("--restores", action="store_true",
                        help="also check that each kept RM snapshot plus its journal rebuilds the next "
                             "snapshot (a run of 'rayrm replay --keep-rm-state')")
    parser.add_argument("--recovery", action="store_true",
                        help="also print the time from each injected fault to its detection and full recovery")


def run(args) -> int:
    import json  # noqa: PLC0415

    from rayrm.rm.runs.check import check_run  # noqa: PLC0415 (pandas only when used)

    results = [check_run(path) for path in args.runs]
    restores = {path: restore_checks(path) for path in args.runs} if args.restores else {}
    recovery = {path: recovery_rows(path) for path in args.runs} if args.recovery else {}
    if args.json:
        payload = [r.as_dict() | ({"restores": [vars(c) for c in restores[r.run]]} if restores else {})
                   | ({"recovery": recovery[r.run]} if recovery else {}) for r in results]
        print(json.dumps(payload[0] if len(payload) == 1 else payload, indent=2))
    else:
        print("\n".join(r.report() + (restore_report(restores[r.run]) if restores else "")
                        + (recovery_report(recovery[r.run]) if recovery else "") for r in results))
    same = all(c.same for checks in restores.values() for c in checks)
    return 0 if all(r.ok for r in results) and same else 1


def restore_checks(run_dir: str) -> list:
    """The run's restore checks; InputError when it kept no RM state to check."""
    from rayrm.rm.service.restores import check_restores, kept_generations  # noqa: PLC0415
    state_dir = Path(run_dir) / "rm-state"
    if len(kept_generations(state_dir)) < 2:
        raise InputError(f"{state_dir}: no kept RM snapshots to check (replay with --keep-rm-state)")
    return check_restores(state_dir)


def restore_report(checks: list) -> str:
    lines = [f"  restores               {sum(c.same for c in checks)} of {len(checks)} snapshots rebuilt "
             f"exactly from the one before and its journal ({sum(c.records for c in checks)} records)"]
    for c in checks:
        lines += [f"  e.g. snapshot {c.generation + 1} differs: {d}" for d in c.differences[:5]]
    lines.append("  OK" if all(c.same for c in checks) else "  RESTORE DIFFERS")
    return "\n" + "\n".join(lines)


def recovery_rows(run_dir: str) -> list[dict]:
    """Per injected fault, its detection and full recovery (``recovery_times``); [] without faults."""
    from rayrm.rm.runs.recovery import recovery_times  # noqa: PLC0415
    return recovery_times(run_dir)


def recovery_report(rows: list[dict]) -> str:
    from rayrm.rm.runs.recovery import format_times  # noqa: PLC0415
    if not rows:
        return "\n  recovery               no fault was injected"
    title = "  recovery after each fault (trace seconds after it; wall seconds after the slash)"
    return "\n" + title + "\n" + "\n".join("  " + line for line in format_times(rows).splitlines())
