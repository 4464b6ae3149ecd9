"""How much a run's job completion times owe to the exact order of events.

The online offer rule (tsf-paper §V-D) is order-sensitive wherever keys sit close
together.  In the micro-benchmark, when jobs 3 and 4 arrive at 150 s, each job1 task
that ends frees a node for whichever of the two has the lower task share
(job3 n₃/100, job4 n₄/75).  A freed 1-CPU node given to job3 holds two of its
0.5-CPU tasks; given to job4 it holds one 1-CPU task and half its memory is lost to
everyone.  Fair shares make the keys nearly equal (n₄ ≈ 0.75 n₃), so which node frees
first — a matter of milliseconds — decides how many slots job3 gets (18 to 21) and
so whether its 100 tasks need five waves or six.

A Ray replay starts containers a few milliseconds after their allocation, so its
order of completions is never exactly the simulator's.  ``completion_spread``
measures what that alone does: it simulates the trace once as given, then ``runs``
more times with launch jitter — each task starts U(0, ``jitter``) trace seconds
after its allocation (``rayrm.rm.sim.engine``), jitter seeds 1..runs — and reports per job the
exact run's completion time beside the minimum, median and maximum of the jittered
ones.  A replay whose completion time lies inside that range differs from the
simulator by no more than the simulator differs from itself.  ``rayrm replay --twin``
reports the range with jitter U(0, 2 × the replay's median allocation-to-running
latency).
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING

import pandas as pd

from rayrm.rm.sim.engine import Simulation

if TYPE_CHECKING:
    from rayrm.rm.core.config import ExperimentConfig

COLUMNS = ["exact", "min", "median", "max"]


def completion_times(config: "ExperimentConfig", policy: str | None = None, seed: int | None = None,
                     jitter: float = 0.0, jitter_seed: int = 0, faults=()) -> dict[str, float]:
    """app -> job completion time (finish − arrival) of one simulated run; unfinished jobs left out.

    ``faults``: fault specs besides the config's own, as ``rayrm.rm.sim.engine.simulate`` takes them.
    """
    log = Simulation(config, policy, seed, launch_jitter=jitter, jitter_seed=jitter_seed,
                     faults=faults).run(progress=False)
    return {app: job["finish"] - job["submit"] for app, job in log.jobs.items()
            if job["status"] == "finished" and job["finish"] is not None}


def completion_spread(config: "ExperimentConfig", policy: str | None = None, seed: int | None = None,
                      jitter: float = 0.1, runs: int = 20, progress: bool = False,
                      faults=(), exact: dict[str, float] | None = None, run_all=None) -> pd.DataFrame:
    """Per job: the exact run's completion time and min / median / max over ``runs`` jittered runs.

    Rows are apps in config order; runs in which a job did not finish are left out of its
    row, which is NaN where it never finished.  ``exact``: the unjittered run's completion
    times when the caller has simulated it already.  ``run_all(fn, arglist)``: how the
    simulations run, returning ``[fn(*args) for args in arglist]`` (default: one after
    another in this process; ``rayrm sensitivity`` passes the Ray runner's).
    """
    if not jitter > 0:
        raise ValueError(f"jitter must be positive, got {jitter}")
    if runs < 1:
        raise ValueError(f"runs must be at least 1, got {runs}")
    arglist = [(config, policy, seed, jitter, k, faults) for k in range(1, runs + 1)]
    if exact is None:
        arglist.insert(0, (config, policy, seed, 0.0, 0, faults))
    if run_all is not None:
        results = run_all(completion_times, arglist)
    else:
        results = []
        for k, args in enumerate(arglist, 1):
            results.append(completion_times(*args))
            if progress:
                print(f"\rrun {k}/{len(arglist)}", end="", file=sys.stderr, flush=True)
        if progress:
            print(file=sys.stderr)
    if exact is None:
        exact, results = results[0], results[1:]
    jittered = results
    apps = [j.app.app_id for j in config.jobs]
    samples = pd.DataFrame(jittered, columns=apps)
    table = pd.DataFrame({"exact": pd.Series(exact, dtype=float).reindex(apps),
                          "min": samples.min(), "median": samples.median(), "max": samples.max()})
    return table[COLUMNS]


def format_spread(table: pd.DataFrame, title: str, limit: int = 20) -> str:
    """The table as text, with each job's jittered range relative to its exact run.

    Past ``limit`` jobs only the ``limit`` widest ranges are shown, after a count of the
    jobs whose range reaches beyond ±5% and ±10%.
    """
    low, high = table["min"] / table["exact"] - 1, table["max"] / table["exact"] - 1
    width = pd.concat([-low, high], axis=1).max(axis=1)
    shown = table
    lines = [title]
    if len(table) > limit:
        lines.append(f"  {len(table)} jobs; jittered range beyond ±5%: {int((width > 0.05).sum())}, "
                     f"beyond ±10%: {int((width > 0.10).sum())}; the {limit} widest:")
        shown = table.loc[width.sort_values(ascending=False).index[:limit]]
    lines.append(f"  {'app':<14}{'exact':>9}{'min':>9}{'median':>9}{'max':>9}   range vs exact")

    def pct(v: float) -> str:
        return "-" if math.isnan(v) else f"{v * 100:+.1f}%"

    for app, row in shown.iterrows():
        lines.append(f"  {str(app):<14}" + "".join(f"{row[c]:>9.1f}" for c in COLUMNS)
                     + f"   {pct(low[app])} .. {pct(high[app])}")
    return "\n".join(lines)
