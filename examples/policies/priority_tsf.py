"""Priority-weighted TSF: Task Share Fairness in which some jobs count for more.

A production job's task share grows ``boost`` times more slowly than a batch job's,
so at equal shares production jobs are served first and in the long run hold ``boost``
times the tasks of an equal batch job (tsf-paper Definition 7, weighted TSF, with the
weight set by the job's class instead of the trace):

    key_i = n_i / (h_i * w_i * b_i),   b_i = boost if app_id starts with ``prefix`` else 1

Use: ``--policy examples/policies/priority_tsf.py:PriorityTSF:prefix=prod:boost=4``.
"""

from rayrm import Policy


class PriorityTSF(Policy):
    """TSF with a priority boost for jobs whose id starts with a prefix: key n_i / (h_i w_i b_i)."""

    name = "priority-tsf"

    def __init__(self, prefix: str = "prod", boost: float = 4.0):
        if not boost > 0:
            raise ValueError(f"boost must be > 0, got {boost}")
        self.prefix, self.boost = str(prefix), float(boost)

    def unit(self, app, cluster):
        if app.h <= 0:
            return float("inf")        # no node could hold a task: never served first
        boost = self.boost if app.app_id.startswith(self.prefix) else 1.0
        return 1.0 / (app.h * app.weight * boost)
