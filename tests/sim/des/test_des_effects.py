"""Each simulator effect on its own: determinism per seed, and the direction it should push."""

from dataclasses import replace

import numpy as np
import pytest

from heterps_sim.des import EFFECTS, DesOptions, simulate
from heterps_sim.testing import chain_plan, chain_problem


@pytest.fixture(scope="module")
def nce():
    """nce-cpu-gpu's exact plan: 2 stages with 4 and 9 replicas (tests/sim/des/data)."""
    from tests.sim.des.test_physics_regressions import shipped
    return shipped("nce-cpu-gpu")


def throughput(problem, plan, effects, seed=0, **options):
    opts = DesOptions(effects=effects, num_steps=6, **options)
    return simulate(problem, plan, seed=seed, options=opts, record_spans=False).result.throughput


def test_same_seed_same_result_and_spans(nce):
    problem, plan = nce
    opts = DesOptions.with_effects("all", num_steps=4, preemption_rate_per_hour=3e4,
                                   restart_delay_s=0.001)
    a = simulate(problem, plan, seed=5, options=opts)
    b = simulate(problem, plan, seed=5, options=opts)
    assert a.result == b.result and a.spans == b.spans and a.events == b.events


@pytest.mark.parametrize("effect", ["jitter", "stragglers", "preemption"])
def test_seeds_differ_when_variability_is_on(nce, effect):
    problem, plan = nce
    # one straggler of 13 units: the long-run rate depends on the stage it lands in (with 30%,
    # every seed puts one in each stage, the same rate once the window has settled)
    extra = {"preemption_rate_per_hour": 3e4, "restart_delay_s": 0.001, "straggler_fraction": 0.1}
    results = {throughput(problem, plan, effect, seed=s, **extra) for s in range(4)}
    assert len(results) > 1


def test_seeds_do_not_matter_without_variability(nce):
    problem, plan = nce
    fixed = "bubbles,allreduce,transfers,contention,ps"
    assert len({throughput(problem, plan, fixed, seed=s) for s in range(3)}) == 1


def test_allreduce_slows_replicated_stages_only():
    p = chain_problem([1.2, 0.4], alpha=0.9, latency_s=1e-4, param_bytes=4e6)
    flushed = {"schedule": "gpipe", "num_microbatches": 3}
    base = throughput(p, chain_plan(p, [1, 1]), "bubbles", **flushed)
    assert throughput(p, chain_plan(p, [1, 1]), "bubbles,allreduce", **flushed) == base  # k = 1
    plan = chain_plan(p, [3, 1])
    slower = throughput(p, plan, "bubbles,allreduce", **flushed)
    assert slower < throughput(p, plan, "bubbles", **flushed)
    assert throughput(p, plan, "bubbles,allreduce", allreduce_algorithm="tree", **flushed) != slower


def test_continuous_pipelines_overlap_the_allreduce_with_the_next_step():
    plan_of = lambda p: chain_plan(p, [3, 1])  # noqa: E731
    small = chain_problem([1.2, 0.4], alpha=0.9, latency_s=1e-4, param_bytes=4e6)  # ~6 ms ring
    assert throughput(small, plan_of(small), "allreduce") == throughput(small, plan_of(small),
                                                                       "none")
    huge = chain_problem([1.2, 0.4], alpha=0.9, latency_s=1e-4, param_bytes=4e9)  # ~5 s ring
    assert throughput(huge, plan_of(huge), "allreduce") < throughput(huge, plan_of(huge), "none")


def test_allreduce_ring_time_is_the_textbook_formula():
    k, nbytes, bw, lat = 4, 8e6, 1e9, 1e-4
    p = chain_problem([0.4], alpha=0.9, latency_s=lat, param_bytes=nbytes, network=bw)
    opts = DesOptions(effects="allreduce,bubbles", num_steps=2, warmup_steps=0)
    run = simulate(p, chain_plan(p, [k]), options=opts)
    ring = [s.duration_s for s in run.spans if s.name == "allreduce"]
    assert len(ring) == k * 2
    assert ring[0] == pytest.approx(2 * (k - 1) / k * nbytes / bw + 2 * (k - 1) * lat)


def test_measured_allreduce_times_replace_the_formula():
    from heterps_sim.des.work import measured_allreduce_seconds
    rows = ((4, 0.0, 1e-3), (4, 1e6, 3e-3), (4, 2e6, 7e-3), (2, 1e6, 1e-3))
    assert measured_allreduce_seconds(rows, 4, 5e5) == pytest.approx(2e-3)   # between sizes
    assert measured_allreduce_seconds(rows, 4, 3e6) == pytest.approx(11e-3)  # last segment on
    assert measured_allreduce_seconds(rows, 2, 5e6) == pytest.approx(1e-3)   # one size: flat
    # a rank count not measured: linear in k - 1 between the measured ones at those bytes,
    # the last segment extended past them, in proportion to k - 1 with one count measured
    assert measured_allreduce_seconds(rows, 3, 1e6) == pytest.approx(2e-3)
    assert measured_allreduce_seconds(rows, 6, 1e6) == pytest.approx(5e-3)
    assert measured_allreduce_seconds(((4, 1e6, 3e-3),), 7, 1e6) == pytest.approx(6e-3)
    assert measured_allreduce_seconds(((4, 1e6, 1e-3), (6, 1e6, 5e-3)), 2, 1e6) == 0.0  # clipped
    assert measured_allreduce_seconds((), 3, 1e6) is None                    # nothing measured
    k, nbytes = 4, 1.5e6
    p = chain_problem([0.4], alpha=0.9, latency_s=1e-4, param_bytes=nbytes, network=1e9)
    opts = DesOptions(effects="allreduce,bubbles", num_steps=2, warmup_steps=0,
                      allreduce_measured=rows)
    ring = [s.duration_s for s in simulate(p, chain_plan(p, [k]), options=opts).spans
            if s.name == "allreduce"]
    assert ring[0] == pytest.approx(5e-3)
    p3 = chain_problem([0.4], alpha=0.9, latency_s=1e-4, param_bytes=nbytes, network=1e9)
    ring3 = [s.duration_s for s in simulate(p3, chain_plan(p3, [3]), options=opts).spans
             if s.name == "allreduce"]  # 3 ranks were not measured: half way from 2 to 4
    assert ring3[0] == pytest.approx((1e-3 + 5e-3) / 2)
    bare = opts.model_copy(update={"allreduce_measured": None})
    ring3 = [s.duration_s for s in simulate(p3, chain_plan(p3, [3]), options=bare).spans
             if s.name == "allreduce"]  # none measured: the ring formula
    assert ring3[0] == pytest.approx(2 * 2 / 3 * nbytes / 1e9 + 2 * 2 * 1e-4)


def test_contention_is_never_faster_than_free_links(nce):
    problem, plan = nce
    for m in (9, 36):
        free = throughput(problem, plan, "transfers", num_microbatches=m)
        assert throughput(problem, plan, "contention", num_microbatches=m) <= free * (1 + 1e-12)
    # Four units send their activations to one: its ingress interface carries the forward half
    # of 2e9 boundary bytes a step at 1e9 B/s, 1 s a step, so at most 64 samples/s, where free
    # links run near the stage model's 64 / ((0.1 + 2) / 4) = 121.9. (Interfaces busy for less
    # than the work between their messages cost nothing in steady state: they serve in the
    # schedule's order, des/service_order.py.)
    p = chain_problem([0.1, 0.1], boundary_bytes=2e9, latency_s=1e-3)
    p = replace(p, boundary_bytes=np.array([2e9, 0.0]))
    plan = chain_plan(p, [4, 1])
    assert throughput(p, plan, "contention") <= 64.0 * (1 + 1e-12) < throughput(p, plan, "transfers")


def test_transfers_are_explicit_messages_with_latency():
    p = chain_problem([0.2, 0.2], boundary_bytes=1e6, latency_s=0.01, network=1e8)
    opts = DesOptions(effects="transfers,bubbles", num_microbatches=2, num_steps=2, warmup_steps=0)
    run = simulate(p, chain_plan(p, [1, 1]), options=opts)
    sends = [s for s in run.spans if s.group == "links"]
    assert {s.name for s in sends} == {f"send {a}{i}" for a in "FB" for i in range(4)}
    assert all(s.duration_s == pytest.approx(0.5e6 / 2 / 1e8 + 0.01) for s in sends)


def test_stragglers_everywhere_halve_the_throughput(nce):
    problem, plan = nce
    base = throughput(problem, plan, "none")
    assert throughput(problem, plan, "stragglers", straggler_fraction=1.0,
                      straggler_slowdown=2.0) == pytest.approx(base / 2, rel=1e-12)
    assert throughput(problem, plan, "stragglers", straggler_fraction=0.2) < base
    assert throughput(problem, plan, "stragglers", straggler_fraction=0.0) == base


def test_preemption_costs_downtime_and_redone_work():
    p = chain_problem([0.5, 0.5], alpha=0.9)
    plan = chain_plan(p, [1, 1])
    base = throughput(p, plan, "none")
    assert throughput(p, plan, "preemption", preemption_rate_per_hour=0.0) == base
    run = simulate(p, plan, options=DesOptions(effects="preemption", num_steps=20,
                                               preemption_rate_per_hour=3600.0,
                                               restart_delay_s=0.2))
    assert run.result.extra["preemptions"] > 0 and run.result.throughput < base
    assert any(s.category == "preempted" for s in run.spans)


def test_bubbles_slow_gpipe_and_1f1b_but_not_async(nce):
    problem, plan = nce
    for schedule in ("gpipe", "1f1b"):
        assert throughput(problem, plan, "bubbles", schedule=schedule) < throughput(
            problem, plan, "none", schedule=schedule)
    assert throughput(problem, plan, "bubbles", schedule="async") == throughput(
        problem, plan, "none", schedule="async")


def test_parameter_server_adds_only_queueing():
    p = chain_problem([0.4, 0.2], odt=0.05, sparse_bytes=[4096.0, 0.0])
    plan = chain_plan(p, [1, 1])  # stage 0 pulls and pushes 256 KiB per batch
    run = simulate(p, plan, options=DesOptions(effects="ps", num_steps=4))
    r = run.result  # one replica: nobody else to queue behind, the odt already holds the PS
    # time; only its own requests queue (a pull queued after a forward waits for the one
    # before it), a few parts in a million here
    assert r.extra["ps_time_s"] > 0
    none = throughput(p, plan, "none")
    assert none * (1 - 1e-4) <= r.throughput <= none * (1 + 1e-12)
    tracks = {s.track for s in run.spans if s.group == "ps"}
    assert {f"ps shard {i}" for i in range(4)} <= tracks


def test_a_saturated_parameter_server_caps_the_throughput():
    from heterps_sim.core.ps_spec import PsSpec
    from heterps_sim.cost import ps_traffic
    slow = PsSpec(shard_bytes_per_s=1e6)
    p = replace(chain_problem([0.4, 0.2], odt=0.05, sparse_bytes=[4096.0, 0.0]), ps=slow)
    plan = chain_plan(p, [8, 8], microbatches=8)
    free = throughput(p, plan, "none")
    cap = ps_traffic.max_throughput(p)  # 4 shards x ~1 MB/s over 8 KiB a sample: ~488/s
    assert cap < free / 2
    run = simulate(p, plan, options=DesOptions(effects="ps", num_steps=24), record_spans=False)
    # a finite run ends before the shards' queue is at its longest: within 1% of the cap
    assert 0.9 * cap <= run.result.throughput <= cap * 1.01


def test_every_effect_changes_a_flushed_scenario(nce):
    problem, plan = nce
    varied = {"schedule": "1f1b", "preemption_rate_per_hour": 3e4, "restart_delay_s": 0.001}
    base = throughput(problem, plan, "bubbles", **varied)
    assert throughput(problem, plan, "none", **varied) != base
    changed = {e for e in EFFECTS if e != "bubbles"
               and throughput(problem, plan, f"bubbles,{e}", **varied) != base}
    assert changed >= set(EFFECTS) - {"bubbles", "transfers", "contention"}  # ~no boundary bytes


def test_barriers_never_stall_a_pipeline():
    """All-reduce barriers with any replica counts, microbatches and schedules (the run raises
    when a replica does not finish)."""
    rng = np.random.default_rng(0)
    for trial in range(120):
        s = int(rng.integers(1, 6))
        p = chain_problem(list(rng.uniform(0.1, 1, s)), alpha=0.9, latency_s=1e-3,
                          param_bytes=1e6, boundary_bytes=1e6, sparse_bytes=[64.0] * s)
        replicas = [int(rng.integers(1, 8)) for _ in range(s)]
        opts = DesOptions(effects=["allreduce", "bubbles,allreduce", "all"][trial % 3],
                          schedule=["gpipe", "1f1b", "async"][int(rng.integers(0, 3))],
                          num_microbatches=int(rng.integers(1, 13)), num_steps=3)
        r = simulate(p, chain_plan(p, replicas), options=opts, record_spans=False).result
        assert r.throughput > 0


def test_cores_serialise_compute_on_a_shared_host():
    """One core: every replica's compute queues for it, so a step costs all the work."""
    p = chain_problem([0.6, 0.4], batch_size=64)
    plan = chain_plan(p, [1, 1], microbatches=4)
    free = throughput(p, plan, "none")
    assert free == pytest.approx(64 / 0.6)
    assert throughput(p, plan, "cores", host_cores=1) == pytest.approx(64 / 1.0, rel=1e-3)
    assert throughput(p, plan, "cores", host_cores=2) == pytest.approx(free)
    replicated = chain_plan(p, [2, 2], microbatches=4)
    assert throughput(p, replicated, "cores", host_cores=1) == pytest.approx(64 / 1.0, rel=1e-3)
    assert throughput(p, replicated, "cores", host_cores=4) == pytest.approx(64 / 0.3)


def test_cores_ignore_the_sleeping_part_of_emulated_compute():
    """A stage dilated 4x holds a core a quarter of its time, so two of them share one core
    with little loss: in the steady pipeline both start each microbatch together and one
    waits for the other's CPU part (0.025 s), so a 0.1 s slot takes 0.125 s."""
    p = chain_problem([0.8, 0.8], batch_size=64)
    plan = chain_plan(p, [1, 1], microbatches=8)
    quarter = throughput(p, plan, "cores", host_cores=1, cpu_share=(0.25, 0.25))
    assert quarter == pytest.approx(64 / (0.8 * 1.125), rel=1e-3)
    full = throughput(p, plan, "cores", host_cores=1)
    assert full == pytest.approx(64 / 1.6, rel=1e-3)
    with pytest.raises(ValueError, match="cpu_share"):
        DesOptions(cpu_share=(0.0, 1.0))


def test_quantized_transfers_move_fewer_bytes():
    """A transfer-bound pipeline runs as fast as its bytes allow: int8 needs a quarter."""
    p = chain_problem([1e-9, 1e-9], boundary_bytes=8e6, network=1e9, batch_size=64)
    plan = chain_plan(p, [1, 1], microbatches=4)
    t = {q: throughput(p, plan, "transfers", quantize=q) for q in ("none", "fp16", "int8")}
    assert t["fp16"] / t["none"] == pytest.approx(2.0, rel=0.01)
    assert t["int8"] / t["none"] == pytest.approx(4.0, rel=0.02)


def test_speed_sharing_moves_microbatches_off_a_slow_replica():
    """One of two replicas 2x slower, 12 microbatches: equal split waits for the slow one's
    6 x 2 = 12 slots a step; by speed it gets 4 (8 slots) and the fast one 8: 1.5x."""
    p = chain_problem([1.2], batch_size=120)
    plan = chain_plan(p, [2], microbatches=12, schedule="gpipe")
    common = {"slow_replicas": ((0, 1, 2.0),)}
    equal = throughput(p, plan, "bubbles", **common)
    speed = throughput(p, plan, "bubbles", share="speed", **common)
    assert speed / equal == pytest.approx(1.5, rel=1e-6)
    assert equal == pytest.approx(120 / (6 * 0.1 * 2))
    with pytest.raises(ValueError, match="flush schedule"):
        throughput(p, plan, "none", share="speed")


def test_speed_sharing_pipelines_without_deadlock():
    p = chain_problem([0.3, 0.9, 0.4], batch_size=96, boundary_bytes=1e5, latency_s=1e-4)
    for schedule in ("gpipe", "1f1b"):
        plan = chain_plan(p, [1, 3, 2], microbatches=6, schedule=schedule)
        opts = {"slow_replicas": ((1, 0, 3.0), (2, 1, 1.5))}
        equal = throughput(p, plan, "bubbles,transfers", **opts)
        speed = throughput(p, plan, "bubbles,transfers", share="speed", **opts)
        assert speed > equal


def test_overlap_hides_the_allreduce_under_the_last_backward():
    p = chain_problem([1.2], batch_size=64, latency_s=1e-3, param_bytes=4e6)
    plan = chain_plan(p, [2], microbatches=4, schedule="gpipe")
    base = throughput(p, plan, "bubbles")
    exposed = throughput(p, plan, "bubbles,allreduce")
    hidden = throughput(p, plan, "bubbles,allreduce", overlap=True)
    assert exposed < hidden <= base
    # backward of one microbatch: 1.2 / 4 x 2/3 = 0.2 s; ring: 4e6 / 1e9 + 2 x 1e-3 = 0.006 s
    assert hidden == pytest.approx(base)


def test_fair_cores_share_speed_among_running_computations():
    """Processor sharing, closed forms: 3 jobs of 1 s on 2 cores all end at 1.5 s; on one
    core, jobs of 1 and 3 s started together end at 2 s (both at half speed) and 4 s."""
    import simpy

    from heterps_sim.des.fair_cores import FairCores

    def ends(cores: int, works: list[tuple[float, float]]) -> list[float]:
        env = simpy.Environment()
        pool = FairCores(env, cores)
        out = [0.0] * len(works)

        def job(i, at, cpu):
            yield env.timeout(at)
            yield pool.run(cpu)
            out[i] = env.now
        for i, (at, cpu) in enumerate(works):
            env.process(job(i, at, cpu))
        env.run()
        return out

    assert ends(2, [(0, 1.0)] * 3) == pytest.approx([1.5] * 3)
    assert ends(1, [(0, 1.0), (0, 3.0)]) == pytest.approx([2.0, 4.0])
    assert ends(2, [(0, 1.0), (0, 1.0)]) == pytest.approx([1.0, 1.0])  # no slow-down
    # a late arrival slows the one running: job 0 runs alone to 0.5 s (0.5 s left), then
    # both run at half speed, so job 0 ends at 1.5 s; job 1, half done, ends alone at 2.0 s
    assert ends(1, [(0, 1.0), (0.5, 1.0)]) == pytest.approx([1.5, 2.0])


def test_fair_cores_in_the_simulator():
    """Two stages, one core: fifo or fair, the core does all the work (same throughput);
    fair with 2 cores is the free pipeline."""
    p = chain_problem([0.6, 0.4], batch_size=64)
    plan = chain_plan(p, [1, 1], microbatches=4)
    free = throughput(p, plan, "none")
    assert throughput(p, plan, "cores", host_cores=1, core_sharing="fair") == pytest.approx(
        64 / 1.0, rel=1e-3)
    assert throughput(p, plan, "cores", host_cores=2, core_sharing="fair") == pytest.approx(free)
    with pytest.raises(ValueError):
        DesOptions(core_sharing="random")


def test_a_shared_core_slows_the_work_without_adding_to_it():
    """One core shared by two stages (fair): each replica's compute seconds per step are its
    work, as with the FIFO queue and with cores left out, though every operation took
    longer than its work while both ran; what the step lost is waiting, not compute."""
    p = chain_problem([0.6, 0.4], batch_size=64)
    plan = chain_plan(p, [1, 1], microbatches=4)

    def run(**options):
        opts = DesOptions(num_steps=6, **options)
        return simulate(p, plan, seed=0, options=opts, record_spans=False).result

    alone = run(effects="none").extra["stage_compute_s"]
    assert alone == pytest.approx([0.6, 0.4])
    for sharing in ("fifo", "fair"):
        shared = run(effects="cores", host_cores=1, core_sharing=sharing)
        assert shared.extra["stage_compute_s"] == pytest.approx(alone)
        assert shared.step_time_s == pytest.approx(1.0, rel=1e-3)  # the core does it all
