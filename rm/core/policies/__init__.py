"""Every online policy, by name (docs/design.md, "Vocabulary and formulas")."""

from __future__ import annotations

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.policies.base import Policy
from rayrm.rm.core.policies.dominant import DominantResourceFairness, DRFHBestFit, DRFHFirstFit, PerMachineDRF
from rayrm.rm.core.policies.single import ConstrainedMaxMin, FirstInFirstOut, Slots
from rayrm.rm.core.policies.task_share import ConstrainedCDRF, TaskShareFairness

_FACTORIES = {
    "tsf": TaskShareFairness,
    "drf": DominantResourceFairness,
    "cdrf": ConstrainedCDRF,
    "cmmf-cpu": lambda: ConstrainedMaxMin("cpu"),
    "cmmf-mem": lambda: ConstrainedMaxMin("memory"),
    "fifo": FirstInFirstOut,
    "drfh-ff": DRFHFirstFit,
    "drfh-bf": DRFHBestFit,
    "pm-drf": PerMachineDRF,
    "slots": Slots,
}

POLICY_NAMES = tuple(_FACTORIES)


def make_policy(name: str, **options) -> Policy:
    """A fresh policy by name; ``slots`` takes ``k`` (slots per largest node, default 14)."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise InputError(f"unknown policy '{name}' (choose from {', '.join(POLICY_NAMES)})") from None
    return factory(**options) if options else factory()


def policy_for_run(name: str, run) -> Policy:
    """``make_policy`` with the options a config's ``RunSettings`` give it (``slots_per_node``
    is the slots policy's k); the simulator and the Ray replay build their policy alike."""
    options = {"k": run.slots_per_node} if name == "slots" else {}
    return make_policy(name, **options)


__all__ = ["Policy", "make_policy", "policy_for_run", "POLICY_NAMES"]
