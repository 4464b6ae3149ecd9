"""The ``rayrm`` command line.

Each subcommand lives in ``rm/cli/<name>.py`` with ``add_arguments(parser)``
and ``run(args) -> int``; those modules import heavy things (Ray, matplotlib)
inside ``run`` so ``rayrm --help`` stays fast.  Errors a user can cause
(``InputError``) become one line on stderr and exit status 2, a run that cannot go on for
a reason outside its input (``RunError``) one line and exit 1 — never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from rayrm.rm.core.errors import InputError, RunError

COMMANDS = [
    ("simulate", "replay a trace in the discrete-event simulator (virtual time)"),
    ("replay", "replay a trace on Ray with ResourceManager, NodeManager and ApplicationMaster actors"),
    ("compare", "run several policies on the same trace and seed and compare them"),
    ("sweep", "compare policies over a grid of workloads and seeds, on Ray, resumably"),
    ("sensitivity", "how much job completion times move when container launches jitter"),
    ("offline", "offline progressive filling (divisible tasks) for a config"),
    ("audit", "search for sharing-property violations (SI, SP, EF, PO, SMF, SRF)"),
    ("trace", "generate synthetic workloads or import public trace formats"),
    ("report", "plots and tables for run directories"),
    ("check", "verify a run directory's invariants"),
    ("policies", "list the built-in policies and the installed policy plugins"),
    ("ui", "the web UI and YARN's REST API over a run directory"),
]


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors on one line (no usage dump), like every other error here."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line.  With ``command`` (one of ``COMMANDS``), only its module is imported
    and its arguments added; the other commands are listed by name and help alone, so a run
    of one command does not import every other's (compare's Ray session, trace's importers:
    a few hundredths of a second of each ``rayrm simulate``)."""
    parser = _Parser(
        prog="rayrm", description="A YARN-style resource manager that replays cluster traces on Ray.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS:
        p = sub.add_parser(name, help=help_text, description=help_text)
        if command is None or name == command:
            # A listed subcommand without its module is a broken install: fail loudly, never
            # offer a command line that silently lacks it.
            module = importlib.import_module(f"rayrm.rm.cli.{name}")
            module.add_arguments(p)
            p.set_defaults(_run=module.run)
    return parser


def _command(argv: list[str]) -> str | None:
    """The command ``argv`` runs, when its first word names one (else None: the whole
    parser, for --help or an unknown command's error)."""
    first = argv[0] if argv else None
    return first if first in dict(COMMANDS) else None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # NumPy's OpenBLAS starts a thread per core that spins at import (about 0.06 s of CPU a
    # process here); nothing rayrm runs multiplies matrices big enough to use them
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    parser = build_parser(_command(argv))
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except InputError as e:
        print(f"rayrm {args.command}: error: {e}", file=sys.stderr)
        return 2
    except RunError as e:
        print(f"rayrm {args.command}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"rayrm {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`rayrm ... | head`): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
