"""``rayrm ui RUN_DIR``: the replay's web UI and YARN's REST API over a run directory.

The same page and API ``rayrm replay`` serves while it runs (docs/ui.md), over a
finished, interrupted or simulated run: its last moment, and its history from the
tables.  Serves until Ctrl-C.
"""

from __future__ import annotations

from rayrm.rm.cli.replay import add_ui_arguments


def add_arguments(parser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (rayrm replay or simulate)")
    add_ui_arguments(parser, "0: one the system picks")


def run(args) -> int:
    import sys  # noqa: PLC0415
    import threading  # noqa: PLC0415

    from rayrm.rm.cli.replay import ui_settings  # noqa: PLC0415
    from rayrm.rm.ui.rundir import RunDirSource  # noqa: PLC0415
    from rayrm.rm.ui.server import serve  # noqa: PLC0415

    settings = ui_settings(args, allow_off=False)
    server = serve(RunDirSource(args.run_dir), settings.host, settings.port, settings.token)
    print(f"rayrm ui: {args.run_dir} at {server.url} (YARN REST API at {server.url}ws/v1/cluster); "
          "Ctrl-C to stop", file=sys.stderr, flush=True)
    try:
        threading.Event().wait()
    finally:
        server.close()
    return 0
