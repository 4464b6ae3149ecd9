"""The sharing-property audit (tsf-paper Table I): the instances it searches, the
property checks, and what-if lies on a user's own config.

Imports ``core``, ``offline`` and ``sim``.
"""
