"""NodeManager hosts: many logical NodeManagers in one async Ray actor per Ray node,
their container executors and their placement over the Ray cluster.

Imports ``rayrm.rm.core`` and ``rayrm.rm.service``.
"""
