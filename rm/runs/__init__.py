"""Run directories: the one schema (``schema``) the writer (``log``) and every reader
(``reader``, ``metrics``, ``check``, ``report``, ``compare``, ``recovery``) share.

Imports only ``rayrm.rm.core``.
"""
