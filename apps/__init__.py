"""ApplicationMaster hosts: many logical ApplicationMasters in one async Ray actor.

Imports ``rayrm.rm.core`` and ``rayrm.rm.service``.
"""
