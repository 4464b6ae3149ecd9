"""The ResourceManager actor's rooms, one concern each (the actor, rm/runtime/actor.py,
wires them): its journal and snapshots, the liveness expiries its monitor decides, the
AM launcher, and its Ray metrics.

Imports ``rayrm.rm.core`` and ``rayrm.rm.service``; the actor imports these.
"""
