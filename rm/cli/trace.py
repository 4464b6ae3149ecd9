"""``rayrm trace``: import public trace formats, or generate synthetic workloads.

::

    rayrm trace import FORMAT INPUT... -o CONFIG [--strict] [format options]
    rayrm trace generate KIND ... -o CONFIG

``import`` writes CONFIG (YAML: cluster and workload) and its job table
``<stem>.jobs.csv`` beside it, prints what it skipped and why to stderr, and
loads the result back before returning, so ``rayrm simulate/replay/compare``
take CONFIG as is.  ``--strict`` stops at the first bad row with one line
naming the file, the row and the field.  Formats live in ``traces/importers/``.

``generate`` hands over to ``rayrm.traces.generate`` (``add_arguments``/``run``).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.policies.plugins import resolve_policy
from rayrm.traces.importers.common import SkipReport, write_config

FORMATS = ("swim", "sls", "openb", "google2011")   # modules in traces/importers/


def add_arguments(parser: argparse.ArgumentParser) -> None:
    verbs = parser.add_subparsers(dest="trace_verb", metavar="VERB")
    imp = verbs.add_parser("import", help="import a public trace format as a rayrm config",
                           description="Import a public trace format as a rayrm config.")
    formats = imp.add_subparsers(dest="format", metavar="FORMAT")
    for name in FORMATS:
        importer = _importer(name)
        p = formats.add_parser(name, help=importer.HELP, description=importer.HELP)
        p.add_argument("-o", "--output", required=True, metavar="CONFIG",
                       help="config to write (YAML); the job table goes to <stem>.jobs.csv beside it")
        p.add_argument("--strict", action="store_true",
                       help="stop at the first bad row instead of skipping it")
        p.add_argument("--name", help="experiment name (default: the config's file stem)")
        p.add_argument("--policy", help="policy written into the config (default: the queue file's "
                                        "default policy, else tsf)")
        p.add_argument("--no-check", action="store_true",
                       help="do not load the written config back to validate it")
        importer.add_arguments(p)
        p.set_defaults(_trace_run=_run_import)
    imp.set_defaults(_trace_run=lambda args: _usage(imp))

    gen = verbs.add_parser("generate", help="generate a synthetic workload",
                           description="Generate a synthetic workload as a rayrm config.")
    try:
        generator = importlib.import_module("rayrm.traces.generate")
        generator.add_arguments(gen)
        gen.set_defaults(_trace_run=generator.run)
    except Exception as e:  # noqa: BLE001 -- a missing or broken generator must not break `import`
        reason = ("traces/generate.py is not there yet" if isinstance(e, ModuleNotFoundError)
                  and e.name == "rayrm.traces.generate" else f"rayrm.traces.generate cannot be used ({e})")
        gen.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        gen.set_defaults(_trace_run=lambda args: _unavailable(reason))
    parser.set_defaults(_trace_run=lambda args: _usage(parser))


def _importer(name: str):
    return importlib.import_module(f"rayrm.traces.importers.{name}")


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_usage(sys.stderr)
    return 2


def _unavailable(reason: str) -> int:
    print(f"rayrm trace generate: error: the generator is not available: {reason}", file=sys.stderr)
    return 2


def _run_import(args: argparse.Namespace) -> int:
    if args.policy not in (None, "ray-native"):
        resolve_policy(args.policy)
    report = SkipReport(f"rayrm trace import {args.format}", strict=args.strict)
    result = _importer(args.format).load(args, report)
    table = write_config(args.output, result, name=args.name, policy=args.policy,
                         check=not args.no_check, report=report)
    report.print(sys.stderr)
    tasks = sum(j.app.num_tasks for j in result.jobs)
    events = f", {len(result.events)} node events" if result.events else ""
    print(f"wrote {args.output} and {table}: {len(result.nodes)} nodes{events}, "
          f"{len(result.jobs)} jobs, {tasks} tasks")
    return 0


def run(args: argparse.Namespace) -> int:
    return int(args._trace_run(args) or 0)
