"""Predicted vs measured: diverse plans, each predicted (analytic, DES) and run for real.

    report = validate(ValidateRequest(scenario="scenarios/exec-tiny.yaml", num_plans=20))

Plans are drawn deterministically from the seed over stage counts (1-4), replica counts
(at most `max_ranks` ranks), schedules (gpipe, 1f1b; async plans can be given), microbatches and the scenario's types
(emulated by the binding). Each is predicted by the analytic model and by the simulator
(`bubbles`, `transfers`, `allreduce`, and `cores`: every rank shares this host's cores, and
so does each message's measured CPU) on a problem calibrated to this machine
(calibration/calibrate.py), then run by the engine. Per plan: throughputs, step-time split (compute,
transfer, bubble/idle) at the bottleneck stage; in total: MAPE and Kendall's tau of the
plan ranking for each predictor.
"""

from __future__ import annotations

import math
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from heterps_sim.core.plan import Plan, Stage

if TYPE_CHECKING:
    from heterps_sim.des import DesOptions

SCHEDULES = ("gpipe", "1f1b")


def diverse_plans(layers: list[str], types: list[str], n: int, *, seed: int = 0,
                  max_ranks: int = 6) -> list[Plan]:
    """n distinct plans covering stage counts, replica counts, schedules and types."""
    rng = random.Random(seed)
    plans, seen = [], set()
    attempts = 0
    while len(plans) < n and attempts < 100 * n:
        attempts += 1
        s = 1 + len(plans) % min(4, len(layers), max_ranks)  # cycle stage counts 1..4
        cuts = sorted(rng.sample(range(1, len(layers)), s - 1))
        bounds = [0, *cuts, len(layers)]
        replicas = [1] * s
        for _ in range(rng.randint(0, max_ranks - s)):
            replicas[rng.randrange(s)] += 1
        m = rng.choice([k for k in (1, 2, 4, 8) if k >= max(replicas)] or [max(replicas)])
        stages = tuple(Stage(layers=tuple(layers[lo:hi]), resource=rng.choice(types),
                             num_replicas=k)
                       for lo, hi, k in zip(bounds[:-1], bounds[1:], replicas, strict=True))
        plan = Plan(stages=stages, num_microbatches=m, schedule=rng.choice(SCHEDULES))
        if plan not in seen:
            seen.add(plan)
            plans.append(plan)
    return plans


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidateRequest:
    scenario: str
    num_plans: int = 20
    binding: str = ""
    """Default: every type emulated on the CPU at its relative peak speed."""
    steps: int = 40
    """Steps per plan, the first `warmup` not measured: a tiny step is a few ms, so many."""
    repeats: int = 1
    """Runs per plan, in rounds over all plans (so each plan meets the machine at several
    moments); a plan's measurement is its run of median throughput."""
    warmup: int = 5
    seed: int = 0
    max_ranks: int = 6
    core_sharing: Literal["fifo", "fair"] = "fair"
    """How the simulator shares this host's cores among the ranks (DesOptions.core_sharing)."""
    out_dir: str = "runs/validate"
    step_overhead_s: float | None = None
    """The runtime's per-step work outside layers; None: measured (with the per-microbatch
    part) by one-rank runs at 1 and 8 microbatches first (runtime_overhead)."""
    microbatch_overhead_s: float = 0.0
    """The runtime's per-microbatch work outside layers, when step_overhead_s is given."""
    message_cpu: dict[str, dict] | None = None
    """Per schedule, what one boundary message costs this host's CPU (the simulator's
    MessageCpu fields); a schedule not named, or None: the links JSON's `message_cpu`
    (gloo's own send and receive), unless calibrate_messages."""
    calibrate_messages: bool = False
    """Measure it first where message_cpu is None: two-rank pipeline runs of each schedule
    the multi-stage plans use, cut at each boundary they cut (calibration/message_cost.py;
    results page "Asynchronous pipelines", "A message's CPU as the engine pays it")."""
    profile_rows: list | None = None
    links: dict | None = None
    plans: tuple[Plan, ...] = ()
    """These plans instead of `num_plans` drawn ones (benchmarks comparing schedules)."""


def mape(predicted: list[float], measured: list[float]) -> float:
    return 100.0 * sum(abs(p - m) / m for p, m in zip(predicted, measured, strict=True)) / len(measured)


def kendall_tau(a: list[float], b: list[float]) -> float:
    from scipy.stats import kendalltau
    tau = kendalltau(a, b).statistic
    return float(tau) if not math.isnan(tau) else 0.0


COMPONENTS = ("compute_s", "transfer_s", "idle_s")
"""A step of the bottleneck stage, split: compute (+ update), communication (messages,
all-reduce, PS), and idle (bubbles, waiting on peers)."""


def _split(stats: list[dict], bottleneck: int) -> dict:
    s = stats[bottleneck]
    return {"compute_s": s["compute_s"], "transfer_s": s["communication_s"], "idle_s": s["idle_s"]}


def _des_split(result, stage: int) -> dict:
    """The simulator's per-step split of `stage` (the measured bottleneck), as _split's."""
    s = result.stages[stage]
    busy = s.exec_time_s
    return {"compute_s": busy * (1.0 - s.comm_share), "transfer_s": busy * s.comm_share,
            "idle_s": max(result.step_time_s - busy, 0.0)}


def run_speed(measured, des, plan, overhead_s: tuple[float, float] = (0.0, 0.0)) -> float:
    """How much slower this machine computed during the run than when it was profiled: the
    run's compute seconds per step (every replica, updates included) over the simulator's.
    The simulator's compute holds the runtime overhead (calibration/calibrate.py folds it into the
    layers), which a run measures as idle time: `overhead_s` = (per step, per microbatch) is
    taken out first, each replica's share of it (every step's, its m / k microbatches').

    This VM's speed drifts: one process stepping exec-tiny alone takes 3.6 to 9 ms per step
    from one second to the next (README, "Validation"), more than any model error we look
    for. Scaling the profiled compute by this one number per run leaves the simulator the
    rest to predict - pipelining, bubbles, messages, all-reduces, cores - which is what the
    `*_at_run_speed` figures judge; the raw figures are reported beside them.
    """
    ks = [s.num_replicas for s in plan.stages]
    ran = sum(k * s["compute_s"] for k, s in zip(ks, measured.extra["stages"], strict=True))
    per_step, per_microbatch = overhead_s
    m = plan.num_microbatches
    model = sum(k * c - (k * per_step + m * per_microbatch)
                for k, c in zip(ks, des.extra["stage_compute_s"], strict=True))
    return ran / model if model > 0 and ran > 0 else 1.0


def allreduce_rows(links: dict) -> tuple[tuple | None, tuple | None]:
    """The links JSON's measured all-reduces as the simulator's (ranks, bytes, seconds) rows
    and (ranks, bytes, CPU seconds) rows, the latter where the file has them (None: none)."""
    rows = links.get("allreduce", ())
    times = tuple((int(r["ranks"]), float(r["bytes"]), float(r["seconds"])) for r in rows)
    cpus = tuple((int(r["ranks"]), float(r["bytes"]), float(r["cpu_s"])) for r in rows
                 if r.get("cpu_s") is not None)
    return times or None, cpus or None


def allreduce_note(links: dict, plans) -> str | None:
    """A line saying which of the plans' all-reduces the links JSON did not measure (a stage's
    replica count absent from its `allreduce` rows) and how the simulator prices them
    (des/work.measured_allreduce_seconds); None when every one was measured."""
    measured = sorted({int(r["ranks"]) for r in links.get("allreduce", ())})
    wanted = sorted({s.num_replicas for p in plans for s in p.stages if s.num_replicas > 1})
    missing = [k for k in wanted if k not in measured]
    if not missing:
        return None
    ks = ", ".join(str(k) for k in missing)
    if not measured:
        return (f"all-reduces of {ks} ranks: none measured in the links file, composed from "
                "its latency and bandwidth (heterps-exec profile measures them)")
    return (f"all-reduces of {ks} ranks: not in the links file (it measured "
            f"{', '.join(str(k) for k in measured)}), read off those counts, linear in k - 1 "
            "(profile for as many ranks as the plans use)")


def simulator_options(plan: Plan, slowdowns: list[float], *, steps: int, warmup: int,
                      allreduce, core_sharing: Literal["fifo", "fair"] = "fair",
                      message_cpu: dict | None = None,
                      allreduce_cpu: tuple | None = None) -> DesOptions:
    """What the engine will do, as simulator options: its steps, the plan's microbatch count
    as it is (the simulator reads a plan's 1 as "unset" and picks its own default; the
    engine runs 1), every rank on this host's cores at its emulated speed (every ready
    operation runs at once at cores / running speed, core_sharing="fair", as the OS
    time-slices them: within 3.4% on three-rank exec-tiny runs where FIFO read them 7-16%
    fast, and 6.1% MAPE against FIFO's 7.0% on 12 diverse plans measured on a quiet host,
    results page "Asynchronous pipelines"; or an operation holds a core until done, "fifo"),
    the measured all-reduce times, and messages
    sent as the engine sends them (isend: the sender goes on, sends_leave_work), each
    charging its measured CPU to the sender's and the receiver's core (`message_cpu`, the links
    JSON's: the ranks, gloo's threads and the copies share this host's cores; None: not
    charged), and an async ring's measured CPU (`allreduce_cpu`, allreduce_rows)."""
    from heterps_sim.des import DesOptions
    return DesOptions(effects={"bubbles", "transfers", "allreduce", "cores"},
                      sends_leave_work=True,
                      num_steps=steps, warmup_steps=warmup,
                      num_microbatches=plan.num_microbatches,
                      host_cores=os.cpu_count() or 1,
                      cpu_share=tuple(1.0 / x for x in slowdowns),
                      allreduce_measured=allreduce, core_sharing=core_sharing,
                      message_cpu=message_cpu, allreduce_cpu_measured=allreduce_cpu)


CALIBRATION_MICROBATCHES = (1, 8)


def runtime_overhead(idle: dict[int, float]) -> tuple[float, float]:
    """(per step, per microbatch) seconds of the runtime's own work, from the idle time per
    step of one-rank runs at two microbatch counts {m: idle}: a line through both, clipped
    at 0 (a noisy pair must not predict negative work)."""
    (m1, i1), (m2, i2) = sorted(idle.items())
    per_microbatch = max((i2 - i1) / (m2 - m1), 0.0)
    return max(i1 - m1 * per_microbatch, 0.0), per_microbatch


def median_run(results: list):
    """The run of median throughput (the lower middle one for an even count), whole: its
    split and compute speed belong to the same run as its throughput."""
    ordered = sorted(results, key=lambda x: x.throughput)
    return ordered[(len(ordered) - 1) // 2]


def slowed(problem, factor: float):
    """The problem with every compute time multiplied by `factor`."""
    from dataclasses import replace
    return replace(problem, oct_s=problem.oct_s * factor)


def component_errors(rows: list[dict]) -> dict:
    """Mean over plans of (predicted - measured) per component, as a share of the measured
    step: where the simulator's step-time error comes from (they sum to the step's error)."""
    out = {}
    for c in COMPONENTS:
        diffs = [(r["des_split"][c] - r["measured_split"][c]) / r["measured_step_s"] for r in rows]
        out[c] = {"mean_signed_pct": 100.0 * sum(diffs) / len(diffs),
                  "mean_abs_pct": 100.0 * sum(abs(d) for d in diffs) / len(diffs)}
    return out


def validate(req: ValidateRequest, progress=None) -> dict:
    """Run the whole comparison; returns the report dict (also written by the CLI)."""
    from heterps_exec.calibration import message_cost
    from heterps_exec.calibration.calibrate import LayerFit, calibrated_problem
    from heterps_exec.launch import binding as bindings
    from heterps_exec.launch.prepare import prepare
    from heterps_exec.launch.torchrun import LaunchOptions, RunFailed, launch
    from heterps_exec.request import RunRequest
    from heterps_exec.runtime.measure import exec_result, load_ranks
    from heterps_sim.core.plan import save_plan
    from heterps_sim.cost.reference import evaluate_plan
    from heterps_sim.des import simulate
    from heterps_sim.inputs.load import load_input
    from heterps_sim.inputs.model_source import section_graph
    from heterps_sim.inputs.scenario import build_cluster

    loaded = load_input(req.scenario)
    scn, base = loaded.scenario, loaded.problem
    user = None
    if getattr(scn.model, "module", None):  # a PyTorch module: its chain's parameter bytes
        from heterps_exec.calibration.user_profiler import layer_param_bytes, user_target
        user = layer_param_bytes(user_target(scn.model, str(req.scenario)).spec)
    graph = None if user else section_graph(scn.model, str(req.scenario))
    fit = LayerFit.from_rows(req.profile_rows)
    latency, bandwidth = req.links["latency_s"], req.links["bytes_per_s"]
    warmup = min(req.warmup, req.steps - 1)
    measured_allreduce, allreduce_cpu = allreduce_rows(req.links)
    plans = list(req.plans) or diverse_plans(list(base.layer_names), list(base.type_names),
                                             req.num_plans, seed=req.seed,
                                             max_ranks=req.max_ranks)
    out = Path(req.out_dir)
    (out / "plans").mkdir(parents=True, exist_ok=True)
    binding_src = req.binding or "emulated"
    binding_file = (bindings.BindingFile(default=bindings.TypeBinding(emulate=True))
                    if not req.binding else bindings.load_binding(req.binding))
    types = {t.name: t for t in build_cluster(scn.cluster, req.scenario).types}
    data_dir = ""

    def run(plan: Plan, name: str, emulate: bool):
        nonlocal data_dir
        plan_path = out / "plans" / f"{name}.json"
        save_plan(plan, plan_path)
        spec, problem = prepare(RunRequest(
            plan=str(plan_path), scenario=req.scenario, binding=req.binding or "cpu",
            steps=req.steps, seed=req.seed, out_dir=str(out / f"run{name}"),
            data_dir=data_dir, warmup_steps=warmup))
        if emulate and req.binding == "":  # the emulated binding, applied by hand (no file)
            spec = _with_bindings(spec, bindings.stage_bindings(binding_file, plan, types,
                                                                binding_src, 0))
        data_dir = data_dir or spec.data_dir
        outcome = launch(spec, LaunchOptions(timeout_s=600))
        if outcome.returncode != 0:
            raise RunFailed(f"plan {name} {'timed out' if outcome.timed_out else 'failed'} "
                            f"(exit {outcome.returncode}); see {outcome.log}")
        return exec_result(spec, problem, load_ranks(spec))

    # other work on the host takes cores the model gives the ranks: reported, not modelled
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    overhead, per_microbatch = req.step_overhead_s, req.microbatch_overhead_s
    one_rank: dict[int, list] = {}  # m -> the one-rank calibration runs (not emulated)

    def calibrate(plan: Plan, name: str) -> list:
        return [run(plan, f"calibration-{name}-{r}", emulate=False) for r in range(req.repeats)]

    def one_rank_runs(m: int) -> list:
        if m not in one_rank:
            whole = Plan(stages=(Stage(layers=tuple(base.layer_names),
                                       resource=base.type_names[0], num_replicas=1),),
                         num_microbatches=m)
            one_rank[m] = calibrate(whole, f"m{m}")
        return one_rank[m]

    if overhead is None:  # one rank, nothing to wait for: its idle time is the runtime's own
        idle = {m: float(np.median([x.extra["stages"][0]["idle_s"] for x in one_rank_runs(m)]))
                for m in CALIBRATION_MICROBATCHES}
        overhead, per_microbatch = runtime_overhead(idle)
    message_cpu = dict(req.message_cpu or {})
    if req.message_cpu is None and req.calibrate_messages:  # as the engine sends it
        message_cpu = message_cost.calibrate(plans, base, req.links.get("message_cpu"),
                                             calibrate, one_rank_runs)
    runs: list[list] = [[] for _ in plans]
    for r in range(req.repeats):  # rounds: every plan once, then again
        for n, plan in enumerate(plans):
            runs[n].append(run(plan, f"{n:03d}" + (f"-{r}" if req.repeats > 1 else ""),
                               emulate=True))
            if progress:
                progress(n, r)
    rows = []
    for n, plan in enumerate(plans):
        slow = [b.slowdown for b in bindings.stage_bindings(binding_file, plan, types,
                                                            binding_src, 0)]
        des_options = simulator_options(plan, slow, steps=req.steps, warmup=warmup,
                                        allreduce=measured_allreduce,
                                        allreduce_cpu=allreduce_cpu,
                                        core_sharing=req.core_sharing,
                                        message_cpu=message_cpu.get(
                                            plan.schedule, req.links.get("message_cpu")))
        problems = {mode: calibrated_problem(base, graph, plan, fit, slow, latency, bandwidth,
                                             for_des=mode == "des", step_overhead_s=overhead,
                                             microbatch_overhead_s=per_microbatch,
                                             param_bytes=user)
                    for mode in ("analytic", "des")}
        analytic = evaluate_plan(problems["analytic"], plan)
        des = simulate(problems["des"], plan, seed=req.seed, options=des_options,
                       record_spans=False).result
        measured = median_run(runs[n])
        speed = run_speed(measured, des, plan, (overhead, per_microbatch))
        at_speed = {mode: slowed(p, speed) for mode, p in problems.items()}
        des_at_speed = simulate(at_speed["des"], plan, seed=req.seed, options=des_options,
                                record_spans=False).result
        analytic_at_speed = evaluate_plan(at_speed["analytic"], plan)
        # the same schedule at the same speed with its boundary messages free (no transfer
        # time, no message CPU): what the schedule's own shape (fill, drain, imbalance,
        # all-reduces, cores) explains; the rest of a measured step is messages and runtime
        free = des_options.model_copy(update={"effects": des_options.effects - {"transfers"},
                                              "message_cpu": None})
        compute_only = simulate(at_speed["des"], plan, seed=req.seed, options=free,
                                record_spans=False).result
        rows.append({
            "plan": n, "stages": len(plan.stages),
            "replicas": "-".join(str(s.num_replicas) for s in plan.stages),
            "schedule": plan.schedule, "microbatches": plan.num_microbatches,
            "slowdowns": "-".join(f"{x:.2f}" for x in slow),
            "measured": measured.throughput, "analytic": analytic.throughput,
            "des": des.throughput, "run_speed": speed,
            "des_at_run_speed": des_at_speed.throughput,
            "analytic_at_run_speed": analytic_at_speed.throughput,
            "measured_step_s": measured.step_time_s, "des_step_s": des.step_time_s,
            "des_compute_only_step_s": compute_only.step_time_s,
            "measured_split": _split(measured.extra["stages"], measured.bottleneck_stage),
            "des_split": _des_split(des, measured.bottleneck_stage),
            "des_bubble": des.extra.get("bubble_fraction", 0.0),
            "measured_runs": [x.throughput for x in runs[n]],
            "measured_stage_compute_s": [s["compute_s"] for s in measured.extra["stages"]],
            "measured_stage_compute_cpu_s": [s["compute_cpu_s"]
                                             for s in measured.extra["stages"]],
            "measured_stage_cpu_s": [s["cpu_s"] for s in measured.extra["stages"]],
            "measured_cpu_cores": measured.extra.get("cpu_cores_busy")})
    meas = [r["measured"] for r in rows]
    return {"num_plans": len(rows),
            "mape_des": mape([r["des"] for r in rows], meas),
            "mape_analytic": mape([r["analytic"] for r in rows], meas),
            "kendall_tau_des": kendall_tau([r["des"] for r in rows], meas),
            "kendall_tau_analytic": kendall_tau([r["analytic"] for r in rows], meas),
            "mape_des_at_run_speed": mape([r["des_at_run_speed"] for r in rows], meas),
            "mape_analytic_at_run_speed": mape([r["analytic_at_run_speed"] for r in rows], meas),
            "kendall_tau_des_at_run_speed": kendall_tau([r["des_at_run_speed"] for r in rows],
                                                        meas),
            "kendall_tau_analytic_at_run_speed": kendall_tau(
                [r["analytic_at_run_speed"] for r in rows], meas),
            "component_errors_des": component_errors(rows),
            "links": {"latency_s": latency, "bytes_per_s": bandwidth},
            "step_overhead_s": overhead, "microbatch_overhead_s": per_microbatch,
            "message_cpu": message_cpu, "links_message_cpu": req.links.get("message_cpu"),
            "allreduce_note": allreduce_note(req.links, plans),
            "repeats": req.repeats, "core_sharing": req.core_sharing,
            "host_load_before": load_before,
            "host_cores": os.cpu_count() or 1, "plans": rows}


def _with_bindings(spec, stage_bindings):
    from dataclasses import replace
    spec = replace(spec, bindings=list(stage_bindings))
    from heterps_sim.core.outputs import atomic_write
    atomic_write(Path(spec.out_dir, "spec.json"), spec.to_json())
    return spec
