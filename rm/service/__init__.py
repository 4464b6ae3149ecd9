"""The ResourceManager's YARN-style protocol as a state machine, without Ray: messages
and calls (``protocol``), per-node/app/container records, node and app services, the
state (``state``), its durable store (``store``) and the client the NM and AM hosts call
it through (``client``; Ray is imported only when a call is made).

Imports ``core`` and ``runs``.
"""
