"""The built-in policies by name: each a ``Policy`` subclass, made like any plugin."""

from __future__ import annotations

from functools import partial

from rayrm.rm.core.policies.dominant import DominantResourceFairness, DRFHBestFit, DRFHFirstFit, PerMachineDRF
from rayrm.rm.core.policies.single import ConstrainedMaxMin, FirstInFirstOut, Slots
from rayrm.rm.core.policies.task_share import ConstrainedCDRF, TaskShareFairness
from rayrm.rm.core.policies.yarn import YarnCapacity, YarnFair

#: name -> (class, the arguments its name fixes)
BUILTIN: dict[str, tuple[type, dict]] = {
    "tsf": (TaskShareFairness, {}),
    "drf": (DominantResourceFairness, {}),
    "cdrf": (ConstrainedCDRF, {}),
    "cmmf-cpu": (ConstrainedMaxMin, {"resource": "cpu"}),
    "cmmf-mem": (ConstrainedMaxMin, {"resource": "memory"}),
    "fifo": (FirstInFirstOut, {}),
    "drfh-ff": (DRFHFirstFit, {}),
    "drfh-bf": (DRFHBestFit, {}),
    "pm-drf": (PerMachineDRF, {}),
    "slots": (Slots, {}),
    "yarn-fair": (YarnFair, {}),
    "yarn-capacity": (YarnCapacity, {}),
}


def factory(name: str):
    """The class of built-in ``name`` with the arguments its name fixes bound."""
    cls, fixed = BUILTIN[name]
    return partial(cls, **fixed) if fixed else cls
