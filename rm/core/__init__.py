"""The scheduling core: resources and the data model, constraints, cluster accounting,
the pending index, the online offer rule and its policies; job specs, fault specs, the
fault rules both drivers follow, and experiment configs.

Plain synchronous Python with no clock: the simulator and the RM service both drive it.
Imports nothing else of rayrm.
"""
