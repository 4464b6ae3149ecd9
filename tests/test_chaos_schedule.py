"""The seeded nemesis (rm/core/chaos.py): its schedule is a function of the seed, written
as --fault specs that parse back to it, and within the budgets that let the trace finish."""

from __future__ import annotations

from collections import Counter

import pytest

from samples import small_config

from rayrm.rm.core.chaos import ChaosShape, ChaosSpec, default_rate, draw_schedule, parse_chaos, shape_of
from rayrm.rm.core.errors import InputError
from rayrm.rm.core.faults import LASTING, parse_faults

# a cluster of 3 NM hosts, 2 AM hosts, 3 Ray nodes; 4 apps, 2 per AM host; max_attempts 2:
# each app may lose one counted attempt
SHAPE = ChaosShape(horizon=7200.0, nm_expiry=20.0, am_expiry=20.0, time_scale=0.05,
                   nodes=("n1", "n2", "n3"), am_host_of={"a": 0, "b": 1, "c": 0, "d": 1},
                   nm_hosts=3, am_hosts=2, ray_nodes=3, max_attempts=2)


def test_the_same_seed_draws_the_same_schedule_and_another_seed_another():
    first = draw_schedule(ChaosSpec(7, 60.0), SHAPE)
    assert first == draw_schedule(ChaosSpec(7, 60.0), SHAPE)
    assert first != draw_schedule(ChaosSpec(8, 60.0), SHAPE)


def test_the_specs_written_parse_back_to_the_same_schedule():
    drawn = draw_schedule(ChaosSpec(3, 60.0), SHAPE)
    # 60 per hour over 2 hours: about 120 (a Poisson draw)
    assert 80 < len(drawn) < 160
    again = parse_faults([f.text for f in drawn], set(SHAPE.nodes), set(SHAPE.am_host_of))
    assert again == drawn


def test_every_kind_is_drawn_and_the_budgets_hold():
    drawn = draw_schedule(ChaosSpec(1, 200.0), SHAPE)
    kinds = Counter(f.kind for f in drawn)
    assert set(kinds) == {"partition-nm-host", "partition-am-host", "slow-nm-host", "slow-am-host", "drop",
                          "kill-nm", "kill-nm-host", "kill-am", "kill-am-host", "kill-rm", "kill-ray-node",
                          "stall-rm"}
    # counted attempt losses per app: kill-am on it, or its AM host partitioned past 20 s
    counted = Counter(f.target for f in drawn if f.kind == "kill-am")
    for f in drawn:
        if f.kind == "partition-am-host" and f.duration > SHAPE.am_expiry:
            counted.update(a for a, h in SHAPE.am_host_of.items() if h == f.index)
    assert max(counted.values()) <= SHAPE.max_attempts - 1
    assert kinds["kill-ray-node"] == 1 and kinds["kill-rm"] <= 4
    assert all(n <= 2 for n in Counter(f.index for f in drawn if f.kind == "kill-nm-host").values())
    # a slow link adds less than half the expiry: 20 trace s x 0.05 = 1 wall s, so < 500 ms
    assert all(f.ms <= 500 for f in drawn if f.kind in ("slow-nm-host", "slow-am-host"))
    assert all(f.duration > 0 for f in drawn if f.kind in LASTING)


def test_one_ray_node_draws_no_kill_ray_node():
    one = ChaosShape(**{**SHAPE.__dict__, "ray_nodes": 1})
    assert not any(f.kind == "kill-ray-node" for f in draw_schedule(ChaosSpec(1, 200.0), one))


def test_the_default_rate_gives_a_fault_per_300_trace_seconds_and_at_least_three():
    # 7200 s: 24 faults over 2 hours = 12 per hour; 600 s: 3 faults over 1/6 hour = 18 per hour
    assert default_rate(7200.0) == pytest.approx(12.0)
    assert default_rate(600.0) == pytest.approx(18.0)


def test_the_shape_of_a_config_reads_its_expiries_and_apps():
    cfg = small_config()
    shape = shape_of(cfg, 0.05, nm_hosts=1, am_hosts=1, ray_nodes=1)
    # 10 heartbeats of 1 s = 10 trace s, below the 1-wall-second floor = 20 trace s
    assert shape.nm_expiry == pytest.approx(20.0) and shape.am_host_of == {"j1": 0, "j2": 0}
    assert shape.horizon >= 6                                       # j2 from 2, 4 s tasks


@pytest.mark.parametrize("text, says", [("x", "SEED a whole number"), ("1:fast", "must be a number"),
                                        ("1:0", "must be > 0"), ("-1", "SEED a whole number")])
def test_a_bad_chaos_spec_is_one_clear_line(text, says):
    with pytest.raises(InputError, match=says):
        parse_chaos(text)
    assert parse_chaos("5:12") == ChaosSpec(5, 12.0) and parse_chaos("5") == ChaosSpec(5)
