"""The replay at paper scale, in its Ray-free parts (issue 11): a bounded generator
tail, per-event work that touches only the event's own containers, and liveness
that does not read the RM's own slowness as silence."""

from __future__ import annotations

import numpy as np

from rayrm.rm.core.jobs import parse_durations
from rayrm.traces.generate import generate_google


def test_max_duration_truncates_the_pareto_tail_and_survives_the_job_table():
    capped = parse_durations("pareto:1.9:30:100")
    assert capped.max == 100 and parse_durations(capped.to_cell()) == capped
    # x_m = 30 × 0.9 / 1.9 = 14.2; P(x > 100) = (14.2 / 100)^1.9 ≈ 2.4%: of 10,000 draws
    # about 240 are cut to exactly 100, and none is longer
    drawn = capped.draw(10_000, np.random.default_rng(1))
    assert drawn.max() == 100 and 150 < int((drawn == 100).sum()) < 350
    _, specs, stats = generate_google(40, 30, 600, seed=2, max_duration=50)
    longest = max(float(s.task_durations(2).max()) for s in specs)
    assert longest <= 50 and stats["longest_task"] == longest and stats["max_duration"] == 50
    _, free, free_stats = generate_google(40, 30, 600, seed=2)
    assert free_stats["longest_task"] > 50 and "max_duration" not in free_stats
