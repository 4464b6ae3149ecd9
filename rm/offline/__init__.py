"""Offline progressive filling for divisible tasks (tsf-paper Algorithm 1) with its LP,
and the sharing-property audit built on it (``audit``).

Imports ``core`` and, for the audit's what-if replays, ``sim``.
"""
