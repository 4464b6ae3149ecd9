"""Trace importers (``importers``) and the synthetic Google-like workload generator.

Imports ``rayrm.rm.core`` only.
"""
