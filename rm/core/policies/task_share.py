"""Task Share Fairness and constrained CDRF: shares in units of tasks.

* TSF (tsf-paper §V-A): task share s_i = n_i / (h_i w_i), where h_i is the number of
  tasks i could run with the whole cluster and *no constraints*.
* Constrained CDRF (tsf-paper §IV-B3): work slowdown n_i / (h_i^c w_i), where h_i^c
  counts only the nodes i may use.  The one-letter difference is the whole point
  of the paper: CDRF rewards a job for claiming more nodes (Fig. 2b).
"""

from rayrm.rm.core.policies.base import Policy
from rayrm.rm.core.shares import TASK_SHARE, WORK_SLOWDOWN


class TaskShareFairness(Policy):
    """Task Share Fairness: key n_i / (h_i w_i), h_i with no constraints (tsf-paper §V-A)."""

    name = "tsf"
    share = TASK_SHARE


class ConstrainedCDRF(Policy):
    """Constrained CDRF: key n_i / (h_i^c w_i), h_i^c over the app's eligible nodes (tsf-paper §IV-B3)."""

    name = "cdrf"
    share = WORK_SLOWDOWN
