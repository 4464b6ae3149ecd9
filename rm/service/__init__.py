"""The ResourceManager's YARN-style protocol as a state machine, without Ray: messages
and calls (``protocol``), per-node/app/container records (``records``), the state
(``state``) and its parts — the NMs (``nodes``), the apps (``apps``), the containers
(``containers``), what the RM heard from each host (``liveness``), the run's records
(``runrecords``) — its durable store (``store``), its actors' garbage collector (``heap``) and the client the NM and AM hosts call
it through (``client``; Ray is imported only when a call is made).

Imports ``core`` and ``runs``.
"""
