"""Availability traces (des/availability.py) and their replay in the job-level simulator:
hand timelines of a dip and of a short launch, the fitted rate and wait, the shipped trace."""

import numpy as np
import pytest

from heterps_sim.core.files import UserFileError
from heterps_sim.des.availability import Availability, load_availability
from heterps_sim.des.job import JobSpec, JobTooLong, Lease, simulate_job

BAMBOO = "traces/spot/bamboo-g4dn-xlarge-us-east-1c-2020-11-20.csv"


def _job(trace, **kw) -> JobSpec:
    lease = Lease("gpu", 2, 3.6, availability=trace, trace_offset_s=0.0)
    base = dict(steps=200, step_s=np.array([10.0]), startup_s=100.0, restart_s=300.0,
                checkpoint_every=0, checkpoint_s=5.0, leases=(lease,))
    base.update(kw)
    return JobSpec(**base)


def test_a_dip_below_the_plans_units_loses_the_work_and_waits_for_capacity():
    # 2 units until 1,000 s, 1 until 1,500 s, 2 after: the job (launched at 100 s) loses its
    # 90 steps at 1,000 s, is ready 300 s after capacity returns, and runs its 200 steps again
    trace = Availability((0.0, 1000.0, 1500.0), (2, 1, 2), 1.0e6)
    o = simulate_job(_job(trace), 0)
    assert (o.reclaims, o.lost_steps) == (1, 90)
    assert o.wall_s == pytest.approx(1800.0 + 2000.0)
    # unit 0 held throughout; unit 1 until the dip and again from capacity's return
    assert o.cost_usd == pytest.approx(3.6 * (3800.0 + 1000.0 + (3800.0 - 1500.0)) / 3600.0)


def test_a_launch_short_of_capacity_waits_for_it_without_a_reclaim():
    trace = Availability((0.0, 500.0), (0, 2), 1.0e6)
    o = simulate_job(_job(trace), 0)
    assert (o.reclaims, o.lost_steps) == (0, 0)
    assert o.wall_s == pytest.approx(500.0 + 300.0 + 2000.0)
    # both units billed for the launch (0-100 s), then from capacity's return
    assert o.cost_usd == pytest.approx(3.6 * 2 * (100.0 + 2800.0 - 500.0) / 3600.0)


def test_a_notice_that_fits_the_write_keeps_the_steps_done_before_the_dip():
    trace = Availability((0.0, 1000.0, 1500.0), (2, 1, 2), 1.0e6)
    o = simulate_job(_job(trace, notice_s=120.0), 0)
    assert o.lost_steps == 0
    assert o.wall_s == pytest.approx(1800.0 + (200 - 90) * 10.0)


def test_a_trace_that_never_has_the_units_is_refused():
    with pytest.raises(JobTooLong, match="never has the plan's 2 units"):
        simulate_job(_job(Availability((0.0,), (1,), 100.0)), 0)


def test_the_fit_counts_falls_per_hour_up_and_the_mean_wait():
    # one hour at 3, 600 s at 1, one hour at 3, 1,200 s at 0, then 3 to the end (period 3 h)
    trace = Availability((0.0, 3600.0, 4200.0, 7800.0, 9000.0), (3, 1, 3, 0, 3), 10800.0)
    rate, wait = trace.fit(2)
    up_hours = (3600 + 3600 + 1800) / 3600.0
    assert rate == pytest.approx(2 / up_hours / 2)
    assert wait == pytest.approx((600.0 + 1200.0) / 2)
    assert trace.fit(1) == (pytest.approx(1 / ((10800 - 1200) / 3600.0)), pytest.approx(1200.0))
    assert trace.fit(4)[0] == float("inf")


def test_replays_wrap_around_the_window():
    trace = Availability((0.0, 50.0), (1, 0), 100.0)
    assert list(trace.changes(75.0, 200.0)) == [(25.0, 1), (75.0, 0), (125.0, 1), (175.0, 0)]
    assert trace.at(130.0) == 1 and trace.at(160.0) == 0


def test_the_shipped_bamboo_trace_loads_as_its_readme_reads_it():
    trace = load_availability(BAMBOO, period_s=95400.0)
    assert trace.units[0] == 0 and max(trace.units) == 12
    assert trace.times_s[1] == 21529.0 and trace.units[1] == 4  # the 0 -> 4 row pair kept as 4
    assert trace.at(90000.0) == 7  # the last level runs to the window's end


@pytest.mark.parametrize("text, words", [
    ("0,1\n10,x\n", "row 2"), ("0,1\n5,2\n3,1\n", "before the row above"),
    ("0,1,2\n", "row 1"), ("", "rows")])
def test_bad_trace_files_are_one_line_naming_the_row(tmp_path, text, words):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(UserFileError, match=words):
        load_availability(path)


def test_a_job_that_cannot_finish_within_its_trace_is_stopped():
    # capacity for 10 s of every 10,000: a 2,000 s job never gets through
    trace = Availability((0.0, 10.0), (2, 0), 10000.0)
    with pytest.raises(JobTooLong, match="outpace"):
        simulate_job(_job(trace, restart_s=1.0), 0)


def test_a_window_is_the_part_of_the_trace_it_names_starting_at_zero():
    trace = Availability((0.0, 100.0, 300.0, 600.0), (4, 2, 5, 1), 1000.0)
    part = trace.window(150.0, 700.0)
    assert part.times_s == (0.0, 150.0, 450.0) and part.units == (2, 5, 1)
    assert part.period_s == 550.0
    # held out: the fit over the part counts only the part's falls (one below 3, at 450 s)
    assert part.fit(3)[0] == pytest.approx(1 / (300.0 / 3600.0) / 3)
    for bad in ((-1.0, 10.0), (500.0, 400.0), (0.0, 1001.0), (float("nan"), 10.0)):
        with pytest.raises(ValueError, match="a trace window"):
            trace.window(*bad)


OOBLECK_P3 = "traces/spot/oobleck-p3-trace.csv"


def test_an_events_file_is_the_units_added_and_not_yet_removed(tmp_path):
    # milliseconds; two adds at 0, a third at 60 s, one removed and one added at 120 s (the
    # level after both), one removed at 300 s, which closes the window
    path = tmp_path / "events.csv"
    path.write_text("0,add,a\n0,add,b\n60000,add,c\n120000,remove,a\n120000,add,d\n"
                    "240000,remove,b\n300000,remove,c\n")
    trace = load_availability(path)
    assert trace.times_s == (0.0, 60.0, 120.0, 240.0) and trace.units == (2, 3, 3, 2)
    assert trace.period_s == 300.0


@pytest.mark.parametrize("text, words", [
    ("0,add,a\n10,remove,b\n", "row 2: b is removed but not held"),
    ("0,add,a\n10,add,a\n", "row 2: a is added while it is held"),
    ("0,add,a\n10,drop,a\n", "row 2: expected milliseconds"),
    ("0,add,a\n-5,add,b\n", "row 2: expected milliseconds"),
    ("0,add,a\n10,1\n", "row 2")])
def test_bad_events_files_are_one_line_naming_the_row(tmp_path, text, words):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(UserFileError, match=words) as exc:
        load_availability(path)
    assert "\n" not in str(exc.value)


def test_the_shipped_p3_trace_loads_as_its_readme_reads_it():
    trace = load_availability(OOBLECK_P3)
    assert trace.units[0] == 18 and trace.period_s == 40920.0  # 18 nodes at 0; 11.37 h
    assert min(trace.units) == 11 and max(trace.units) == 32
    # what the held-out benchmark rests on: the first half never holds fewer than 12, the
    # second half falls below 12 (so a 12-unit job's fitted rate is 0 and its replay is not)
    first, second = trace.window(0.0, 20460.0), trace.window(20460.0, 40920.0)
    assert min(first.units) >= 12 and first.fit(12)[0] == 0.0
    assert min(second.units) < 12 and second.fit(12)[0] > 0.0
    assert min(second.units) >= 11 and second.fit(11)[0] == 0.0
