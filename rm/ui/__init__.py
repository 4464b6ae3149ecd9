"""The ResourceManager's web UI and YARN's REST API, live during a replay and over a run directory.

``server`` serves one ``ClusterView`` source over HTTP (stdlib ``ThreadingHTTPServer``):
YARN's ResourceManager REST API under ``/ws/v1/cluster`` (``yarn``), rayrm's own views
under ``/ws/v1/rayrm`` (``extras``) and the page at ``/`` (``static/``).  A source is
either ``live.LiveSource`` — the driver's poller of the RM actor's compact snapshot
(``snapshot``), read at most once per heartbeat interval, so HTTP never runs on the
RM's event loop — or ``rundir.RunDirSource`` over a finished, interrupted or simulated
run directory.

May import ``rayrm.rm.core``, ``rayrm.rm.runs`` and ``rayrm.rm.service`` (below it); no
Ray import: the driver hands the live source a function that fetches the snapshot.
"""
