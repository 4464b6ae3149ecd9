"""The live web UI of a replay: the driver's poller of the RM actor and the HTTP server.

``start_live_ui(cfg, policy, time_scale, faults, settings)`` starts
``rayrm.rm.ui.live.LiveSource`` with a fetch that calls the RM actor's ``ui_snapshot``
(looked up by name, so it follows an RM restart) and serves it
(``rayrm.rm.ui.server``); the driver closes it when the replay ends.  Requests never
reach the RM: they read the view the poller last built.
"""

from __future__ import annotations

import sys

from rayrm.rm.service.protocol import NAMESPACE, RM_NAME
from rayrm.rm.ui.live import LiveSource
from rayrm.rm.ui.server import UISettings, serve

#: wall seconds one snapshot call may take (a stalled RM) before the poll gives up on it
FETCH_TIMEOUT = 5.0


def rm_fetcher():
    """A function returning the RM actor's snapshot, or None while there is no RM actor."""
    import ray  # noqa: PLC0415

    handle = None

    def fetch():
        nonlocal handle
        if handle is None:
            try:
                handle = ray.get_actor(RM_NAME, namespace=NAMESPACE)
            except ValueError:
                return None
        try:
            return ray.get(handle.ui_snapshot.remote(), timeout=FETCH_TIMEOUT)
        except Exception:
            handle = None           # looked up again: the RM may have restarted
            raise

    return fetch


def start_live_ui(cfg, policy: str, time_scale: float, faults, settings: UISettings):
    """The started server, its ``url`` announced on stderr."""
    source = LiveSource(cfg, policy, time_scale, rm_fetcher(), faults).start()
    try:
        server = serve(source, settings.host, settings.port, settings.token)
    except OSError:
        source.close()
        raise
    print(f"rayrm replay: watching live at {server.url} (YARN REST API at {server.url}ws/v1/cluster)",
          file=sys.stderr, flush=True)
    return server
