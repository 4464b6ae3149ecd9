"""Fair share with aging: TSF plus an age term and a size term, in the manner of Slurm's
multifactor priority, so that small jobs that have waited long get ahead.

    key_i = n_i * s_i / (h_i * w_i) + submit_i / tau,   s_i = min(1, T_i / small)

* Age: a job's age at a decision is now - submit_i, and now is the same for every job
  compared, so "older first by 1 per tau seconds" is exactly the term submit_i / tau:
  a job that arrived tau seconds earlier is one task share ahead.
* Size: a job of T_i <= ``small`` tasks has its share grow only T_i / small as fast,
  so a short job is not starved behind a long one that holds a similar share.

Use: ``--policy examples/policies/aging.py:AgingFairShare:tau=60:small=20``.
"""

from rayrm import Policy


class AgingFairShare(Policy):
    """TSF with Slurm-style age and size factors: key n_i min(1, T_i/small) / (h_i w_i) + submit_i / tau."""

    name = "aging-fair-share"

    def __init__(self, tau: float = 600.0, small: int = 20):
        if not tau > 0 or not small >= 1:
            raise ValueError(f"tau must be > 0 and small >= 1, got tau={tau}, small={small}")
        self.tau, self.small = float(tau), int(small)

    def unit(self, app, cluster):
        if app.h <= 0:
            return float("inf")
        size = min(1.0, app.spec.num_tasks / self.small)
        return size / (app.h * app.weight)

    def key(self, app):
        return app.running * app.unit + app.submit / self.tau
