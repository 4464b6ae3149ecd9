"""Every online policy, by name (docs/design.md, "Vocabulary and formulas"; docs/policies.md).

``Policy`` is the public base class; a policy string names a built-in, a file, a module
or an installed plugin (``rayrm.rm.core.policies.plugins``).
"""

from __future__ import annotations

from rayrm.rm.core.policies.plugins import make_policy, policy_for_run
from rayrm.rm.core.policies.base import Policy, PolicyError
from rayrm.rm.core.policies.builtin import BUILTIN

POLICY_NAMES = tuple(BUILTIN)

__all__ = ["Policy", "PolicyError", "make_policy", "policy_for_run", "POLICY_NAMES"]
