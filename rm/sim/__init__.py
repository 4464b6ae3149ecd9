"""The discrete-event simulator: the core on a virtual clock (``engine``), its model of
the replay's faults (``faults``) and the launch-jitter spread (``sensitivity``).

Imports ``core`` and ``runs``.
"""
