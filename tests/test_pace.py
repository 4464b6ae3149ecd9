"""The replay's pace verdict and its suggested time scale (rm/runtime/pace.py), from made-up meters."""

import pytest

from rayrm.rm.runtime.pace import PaceMeter, pace_summary, pace_warning


def meter(lags, interval=0.02):
    """A PaceMeter export whose ticks lagged ``lags`` wall seconds, one tick a second."""
    return {"interval_wall": interval, "samples": [(float(t), x) for t, x in enumerate(lags)],
            "beat_lags": list(lags)}


def test_kept_pace_allows_five_percent_of_ticks_behind():
    # 100 ticks, 4 over the 0.02 s interval: 4% behind <= 5%, so no suggestion
    pace = pace_summary(meter([0.001] * 96 + [0.05] * 4), time_scale=0.02)
    assert pace["behind_fraction"] == 0.04
    assert pace["kept_pace"] is True
    assert "suggested_time_scale" not in pace
    assert pace_warning(pace, 0.02) == ""


def test_behind_suggests_the_scale_where_the_99th_percentile_lag_fits_one_interval():
    # 100 ticks, 10 at 0.05 s: 10% behind.  The 99th percentile (numpy linear, index
    # 0.99 * 99 = 98.01, between two 0.05 samples) is 0.05 s = 2.5 intervals, so the
    # interval must grow 2.5x: 0.02 * 2.5 = 0.05.  The RM's CPU: 10 s of 20 s = 0.5,
    # / 0.7 = 0.71 < 2.5, so the lag decides.
    pace = pace_summary(meter([0.001] * 90 + [0.05] * 10), time_scale=0.02, cpu_seconds=10, wall_seconds=20)
    assert pace["behind_fraction"] == 0.1
    assert pace["kept_pace"] is False
    assert pace["rm_cpu_utilisation"] == 0.5
    assert pace["suggested_time_scale"] == pytest.approx(0.05)
    # lag in trace seconds is wall / time scale: p50 0.001 / 0.02 = 0.05
    assert pace["lag_trace_s"]["p50"] == pytest.approx(0.05)
    assert "Try --time-scale 0.05" in pace_warning(pace, 0.02)


def test_the_suggestion_follows_the_tail_not_the_95th_percentile():
    # 93 ticks at 0.001, 5 at 0.03, 2 at 0.1: 7% behind.  p99 (index 98.01, both 0.1) is
    # 0.1 s = 5 intervals: 0.02 * 5 = 0.1 (the 95th percentile, 0.03, would say 0.03)
    pace = pace_summary(meter([0.001] * 93 + [0.03] * 5 + [0.1] * 2), time_scale=0.02)
    assert pace["behind_fraction"] == 0.07
    assert pace["suggested_time_scale"] == pytest.approx(0.1)


def test_a_busy_rm_suggests_by_its_cpu_utilisation():
    # every tick 0.03 s late: q / interval = 1.5; the RM used 18 CPU s in 10 wall s = 1.8,
    # / 0.7 = 2.571 > 1.5, so 0.02 * 2.5714 = 0.051428, rounded up to two digits: 0.052
    pace = pace_summary(meter([0.03] * 50), time_scale=0.02, cpu_seconds=18, wall_seconds=10)
    assert pace["behind_fraction"] == 1.0
    assert pace["suggested_time_scale"] == pytest.approx(0.052)


def test_a_meter_samples_the_worse_of_loop_and_heartbeat_lag():
    m = PaceMeter(0.02)
    m.heartbeat_due(now=10.0, due=9.97)     # a batch handled 0.03 s after it was due
    m.tick(now=10.0, late=0.01)             # the loop itself 0.01 s late: the tick records 0.03
    m.tick(now=10.1, late=0.002)            # no heartbeat since: the loop's 0.002
    assert [x for _, x in m.samples] == pytest.approx([0.03, 0.002])
    assert m.beat_lags == pytest.approx([0.03, 0.0])


def test_no_samples_says_not_measured():
    pace = pace_summary(meter([]), time_scale=0.02)
    assert pace["kept_pace"] is None
