"""The job-level simulator (des/job.py) against closed forms it was not derived from: Daly's
expected segment time under Poisson reclaims, the bill of units held the whole job, the
no-reclaim timeline, and piecewise price integrals."""

import math

import numpy as np
import pytest

from heterps_sim.des.job import JobSpec, Lease, PriceTrace, expected_run_s, simulate_job


def _daly(rate_per_s: float, restart_s: float, work_s: float) -> float:
    """Expected seconds to get `work_s` done without a failure, restarting after each one,
    the restart taking restart_s after the last failure (Daly 2006, eq. for exponential
    failures with failures during restart)."""
    return math.exp(rate_per_s * restart_s) * math.expm1(rate_per_s * work_s) / rate_per_s


def _spec(**kw) -> JobSpec:
    base = dict(steps=1000, step_s=np.array([10.0]), startup_s=120.0, restart_s=300.0,
                checkpoint_every=100, checkpoint_s=30.0,
                leases=(Lease("gpu", 4, 2.0, reclaims_per_hour=0.5),))
    base.update(kw)
    return JobSpec(**base)


def _mean_and_se(values) -> tuple[float, float]:
    x = np.asarray(values, dtype=float)
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(len(x)))


def test_the_mean_run_is_dalys_expected_time_per_segment():
    # a restart as long as the mean time between reclaims: waiting restart_s after the LAST
    # reclaim (e^(L R) = 2.72) and after the first one (1 + L R = 2) part by a third
    spec = _spec(restart_s=1800.0)
    runs = [simulate_job(spec, seed).run_s for seed in range(1500)]
    rate = 4 * 0.5 / 3600.0
    expected = 9 * _daly(rate, 1800.0, 100 * 10.0 + 30.0) + _daly(rate, 1800.0, 100 * 10.0)
    assert expected_run_s(spec) == pytest.approx(expected)  # the module's own, same law
    mean, se = _mean_and_se(runs)
    assert abs(mean - expected) < 4 * se, (mean, expected, se)
    assert 4 * se < 0.05 * expected


def test_zone_outages_alone_follow_the_same_law_and_cut_every_unit_of_the_zone():
    lease = Lease("gpu", 3, 2.0, zone="use1-az1")
    spec = _spec(leases=(lease, Lease("cpu", 2, 0.5)), zone_outages_per_hour={"use1-az1": 1.5},
                 notice_s=120.0, checkpoint_s=200.0)  # the notice cannot fit the write
    outcomes = [simulate_job(spec, seed) for seed in range(1500)]
    rate = 1.5 / 3600.0
    expected = 9 * _daly(rate, 300.0, 1000.0 + 200.0) + _daly(rate, 300.0, 1000.0)
    mean, se = _mean_and_se([o.run_s for o in outcomes])
    assert abs(mean - expected) < 4 * se, (mean, expected, se)
    for o in outcomes[:200]:
        # three units held all the job, each reclaimed unit held a notice beside its
        # replacement; the on-demand hosts (never reclaimed) the whole job
        held = 3 * 2.0 * o.wall_s / 3600 + o.reclaims * 3 * 2.0 * 120.0 / 3600
        assert o.cost_usd == pytest.approx(held + 2 * 0.5 * o.wall_s / 3600, rel=1e-12)


def test_units_held_all_job_are_billed_for_the_wall_time_exactly():
    spec = _spec(fixed_per_hour=3.0)
    for seed in range(50):
        o = simulate_job(spec, seed)
        assert o.cost_usd == pytest.approx((4 * 2.0 + 3.0) * o.wall_s / 3600.0, rel=1e-12)
        assert o.wall_s == pytest.approx(o.run_s + 120.0)


def test_without_reclaims_the_job_is_its_steps_and_checkpoints_billed_in_granules():
    spec = _spec(leases=(Lease("gpu", 4, 2.0),), step_s=np.array([9.0, 11.0]),
                 granularity_s=60.0)
    o = simulate_job(spec, 3)
    drawn = np.random.default_rng([3, 0x10B])
    work = sum(float(drawn.choice(np.array([9.0, 11.0]), size=100).sum()) for _ in range(10))
    assert o.run_s == pytest.approx(work + 9 * 30.0)
    assert (o.reclaims, o.lost_steps, o.checkpoints) == (0, 0, 9)
    assert o.cost_usd == pytest.approx(4 * 2.0 * math.ceil(o.wall_s / 60.0) / 60.0)


def test_a_notice_that_fits_the_checkpoint_write_loses_no_finished_step():
    slow = _spec(notice_s=0.0)
    warned = _spec(notice_s=120.0)
    lost = sum(simulate_job(slow, s).lost_steps for s in range(100))
    assert lost > 1000  # without a notice a reclaim loses up to a segment
    for seed in range(100):
        o = simulate_job(warned, seed)
        assert o.lost_steps == 0
        assert o.run_s >= 1000 * 10.0 + 9 * 30.0 - 1e-9


def test_episodes_are_deterministic_in_the_seed():
    spec = _spec()
    assert simulate_job(spec, 7) == simulate_job(spec, 7)
    assert len({simulate_job(spec, s).run_s for s in range(20)}) > 10


def test_a_price_trace_is_integrated_piece_by_piece():
    trace = PriceTrace((0.0, 3600.0, 7200.0), (1.0, 3.0, 0.5))
    assert trace.cost(1800.0, 9000.0) == pytest.approx(0.5 * 1.0 + 3.0 + 0.5 * 0.5)
    spec = _spec(leases=(Lease("gpu", 1, 99.0, prices=trace),), steps=10, checkpoint_every=0,
                 startup_s=0.0)
    o = simulate_job(spec, 0)  # 100 s in the first hour's price
    assert o.cost_usd == pytest.approx(100.0 / 3600.0)


@pytest.mark.parametrize("kw, word", [
    (dict(steps=0), "steps"), (dict(step_s=np.array([0.0])), "positive"),
    (dict(restart_s=-1.0), "restart_s"), (dict(notice_s=math.nan), "notice_s"),
    (dict(checkpoint_every=-1), "checkpoint_every")])
def test_bad_job_specs_are_refused_by_name(kw, word):
    with pytest.raises(ValueError, match=word):
        _spec(**kw)


def test_bad_price_traces_are_refused():
    with pytest.raises(ValueError, match="starts at 0"):
        PriceTrace((5.0,), (1.0,))
    with pytest.raises(ValueError, match="increase"):
        PriceTrace((0.0, 10.0, 10.0), (1.0, 2.0, 3.0))
    with pytest.raises(ValueError, match="finite"):
        PriceTrace((0.0,), (-1.0,))


def test_a_job_whose_reclaims_outpace_its_restarts_is_stopped_with_a_reason():
    from heterps_sim.des.job import JobTooLong
    spec = _spec(leases=(Lease("gpu", 4, 2.0, reclaims_per_hour=500.0),), restart_s=600.0)
    with pytest.raises(JobTooLong, match="outpace"):  # refused before it runs (Daly)
        simulate_job(spec, 0)
