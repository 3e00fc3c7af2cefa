"""Throughput-limit sweeps: every scheduler at every limit -> one table and every plan.

    limits = log_limits(*reachable_range(problem, "exact"), 50)
    result = run_sweep(problem, SweepSpec(schedulers=fast_schedulers(), limits=limits), jobs=2)
    result.frame        one row per scheduler x limit (COLUMNS), in (scheduler, limit) order
    result.plans        the plan.json dict of each row (units fixed), None where infeasible

The default limits run from the cheapest plan's throughput (the exact optimum at a limit of
~0: below it the cheapest plan is already fast enough, so the curve is flat) to the highest
reachable throughput: the largest limit at which the exact scheduler still finds a plan,
found by doubling from the low end until it raises NoFeasiblePlan and then bisecting on a log
scale to 0.1% (about 15 exact runs; availability caps and the 65,536-unit bound per stage are
respected because the exact scheduler's own verdict decides). Near that top the Amdahl
ceiling makes units, and cost, explode: that wall is part of the answer.

Each (scheduler, limit) point runs in a worker process (concurrent.futures); rows come back in
the same order whatever the number of workers, and every point uses the same seed, so equal
inputs give equal tables (the `wall_s` column aside): a one-point sweep at a row's limit
reproduces that row. Plans are saved with their provisioned units fixed. The single-type
reference columns (what the best
single-type plan costs at that limit, and what one type buys for the same $/hour) are
analytic, whatever the engine.
"""

from __future__ import annotations

import math
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

import numpy as np
import pandas as pd

from heterps_sim.core.files import UserFileError
from heterps_sim.core.problem import Problem

COLUMNS = ["index", "scheduler", "throughput_limit", "feasible", "cost_usd", "throughput",
           "hours", "cost_per_hour", "num_stages", "num_units", "units", "evaluations", "wall_s",
           "single_type_cost_usd", "single_type_throughput_same_cost", "engine", "mode",
           "plan_file", "reason"]
"""tradeoff.csv. `units` is "type xK, type xK" (as `compare` prints it); `index` is the limit's
position in the sweep; `plan_file` is relative to the sweep folder ("" when infeasible)."""

ENGINES = ("analytic", "des")
TINY_LIMIT = 1e-6
"""samples/s: a limit every stage meets with one unit (finds the cheapest plan)."""
SLOW_SCHEDULERS = {"bayesian": "optuna TPE, ~4 s a run on a 64-type problem",
                   "exact-flushed": "an exact label search, seconds to minutes a run on a "
                                    "64-type problem"}
"""Left out of the default list (they can still be named). Schedulers that need torch (the
RL schedulers, under heterps_sim.schedulers.rl) are slow too: they train a policy per run."""


class SweepError(UserFileError):
    """Bad sweep settings or a problem with no feasible plan at any limit (one line)."""


def is_slow(name: str) -> bool:
    from heterps_sim.schedulers.registry import SCHEDULERS
    return name in SLOW_SCHEDULERS or ".schedulers.rl" in SCHEDULERS.get(name, "")


def fast_schedulers() -> list[str]:
    """The default sweep list: exact first, then every registered scheduler that is fast."""
    from heterps_sim.schedulers.registry import scheduler_names
    return ["exact"] + [n for n in scheduler_names() if n != "exact" and not is_slow(n)]


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepSpec:
    """What to sweep: schedulers x limits, under one provisioning mode and engine."""

    schedulers: tuple[str, ...]
    limits: tuple[float, ...]
    """Throughput limits, samples/s, ascending."""
    mode: str = "exact"
    """Provisioning mode (cost.MODES). "exact" by default: a plan may then always buy more
    units than the limit needs, so the optimum's cost never falls as the limit rises. Under
    "least" (the paper's rule) it can: a higher floor forces more units onto the bottleneck
    stage, the pipeline finishes sooner, and the bill can shrink (tests/sim/studies/test_sweep.py)."""
    engine: str = "analytic"
    """"analytic" (the cost model) or "des" (the simulator re-costs each scheduled plan)."""
    effects: tuple[str, ...] = ()
    """Simulator effects for engine "des" (des.EFFECTS); none: the DES reproduces the
    analytic numbers, so the engine matters only with effects on."""
    budget: int | None = 2000
    """Evaluations for every budgeted search (None: each scheduler's own default)."""
    seed: int = 0

    def __post_init__(self) -> None:
        from heterps_sim.schedulers.registry import scheduler_class
        if not self.schedulers:
            raise SweepError("--schedulers: name at least one scheduler")
        for name in self.schedulers:
            try:
                scheduler_class(name)
            except KeyError as exc:
                raise SweepError(f"--schedulers: {exc.args[0]}") from None
        if not self.limits or any(not (x > 0 and math.isfinite(x)) for x in self.limits):
            raise SweepError("--limits: every limit must be a positive number of samples/s")
        if self.engine not in ENGINES:
            raise SweepError(f"--engine: expected one of {', '.join(ENGINES)}")
        if self.effects and self.engine != "des":
            raise SweepError("--effects: simulator effects need --engine des")
        if self.budget is not None and self.budget < 1:
            raise SweepError("--budget: expected a positive number of evaluations")


@dataclass(frozen=True, slots=True)
class SweepResult:
    """What a sweep produced: the table, the plans, and how long it took."""

    frame: pd.DataFrame
    """One row per scheduler x limit (COLUMNS), in (scheduler, limit) order."""
    plans: tuple[dict | None, ...]
    """The plan.json dict of each row of `frame` (same order), units fixed; None if none."""
    wall_s: float = 0.0
    """Seconds for the whole sweep (workers included)."""


def parse_limits(text: str) -> tuple[float, float]:
    """"LO:HI" in samples/s (e.g. "1e6:5e7") -> (lo, hi); ValueError with a readable message."""
    lo_s, sep, hi_s = text.partition(":")
    try:
        lo, hi = float(lo_s), float(hi_s)
    except ValueError:
        raise SweepError(f"--limits {text!r}: expected LO:HI in samples/s, e.g. 1e6:5e7") from None
    if not sep or not (0 < lo <= hi) or not math.isfinite(hi):
        raise SweepError(f"--limits {text!r}: expected 0 < LO <= HI (samples/s), e.g. 1e6:5e7")
    return lo, hi


def log_limits(lo: float, hi: float, num_points: int) -> tuple[float, ...]:
    """`num_points` limits log-spaced from lo to hi (both included)."""
    if num_points < 1:
        raise SweepError("--points: expected at least 1")
    if num_points == 1 or lo == hi:
        return (float(lo),)
    return tuple(float(x) for x in np.geomspace(lo, hi, num_points))


def _answer(problem: Problem, name: str, mode: str, options: dict | None = None,
            seed: int = 0):
    """The planner's answer (planner.Answer) of scheduler `name` on `problem`."""
    from heterps_sim.planner import Planner
    return Planner(search=name, options=dict(options or {}), seed=seed,
                   provisioning=mode).plan(problem)


def _exact_throughput(problem: Problem, limit: float, mode: str) -> float | None:
    answer = _answer(problem.with_limit(limit), "exact", mode)
    return answer.result.throughput if answer.feasible else None


def reachable_range(problem: Problem, mode: str = "exact", rel_tol: float = 1e-3) -> tuple[float, float]:
    """(cheapest plan's throughput, highest reachable limit), samples/s (see the module doc)."""
    lo = _exact_throughput(problem, TINY_LIMIT, mode)
    if lo is None:
        out = _answer(problem.with_limit(TINY_LIMIT), "exact", mode)
        raise SweepError(f"{problem.name or 'problem'}: no feasible plan at any limit: "
                         f"{out.notes.get('reason', '')}")
    good, bad = lo, lo * 2.0
    while _exact_throughput(problem, bad, mode) is not None:
        good, bad = bad, bad * 2.0
    while bad / good > 1.0 + rel_tol:
        mid = math.sqrt(good * bad)
        good, bad = (mid, bad) if _exact_throughput(problem, mid, mode) is not None else (good, mid)
    return lo, good


LIMITS_HOW = ("log-spaced from the cheapest plan's throughput (the exact optimum at a limit of "
              "~0) to the highest reachable (the largest limit the exact scheduler still meets: "
              "doubling, then bisection to 0.1%)")


def choose_limits(problem: Problem, text: str | None, num_points: int,
                  mode: str = "exact") -> tuple[tuple[float, ...], dict]:
    """(limits, how they were chosen): from "LO:HI" when given, else reachable_range."""
    if num_points < 1:
        raise SweepError("--points: expected at least 1")
    if text:
        lo, hi = parse_limits(text)
        how = "given with --limits, log-spaced"
    else:
        (lo, hi), how = reachable_range(problem, mode), LIMITS_HOW
    return log_limits(lo, hi, num_points), {"low": lo, "high": hi, "how": how}


# -- one point (runs in a worker) -------------------------------------------------------------
_PROBLEM: Problem | None = None


def _init_worker(problem: Problem) -> None:
    global _PROBLEM
    _PROBLEM = problem


def _init_pool_worker(problem: Problem, show: bool) -> None:
    """A worker process: its problem, and whether it may say it is compiling the kernels
    (the parent's progress setting: a worker's stderr is the parent's)."""
    from heterps_sim.util import progress
    progress.configure(show)
    _init_worker(problem)


def _run_point(task: tuple) -> tuple[int, dict, dict | None]:
    """(task id, row, plan dict) for one scheduler at one limit; the scheduler's own phases
    stay hidden under the sweep's bar."""
    from heterps_sim.util import progress
    with progress.inner():
        return _point(task)


def _point(task: tuple) -> tuple[int, dict, dict | None]:
    from heterps_sim.studies.compare import scheduler_options
    tid, index, name, limit, spec = task
    problem = _PROBLEM.with_limit(limit)
    outcome = _answer(problem, name, spec.mode, scheduler_options(name, spec.budget, spec.seed),
                      spec.seed)
    result, plan = outcome.result, None
    if result is not None and outcome.plan is not None and result.stages:
        plan = outcome.plan.with_replicas([s.num_replicas for s in result.stages])
        if spec.engine == "des":
            from heterps_sim.des import DesOptions, simulate
            options = DesOptions(effects=frozenset(spec.effects))
            result = simulate(problem, plan, seed=spec.seed, options=options,
                              record_spans=False).result
    feasible = bool(result is not None and result.feasible)
    row = {"index": index, "scheduler": name, "throughput_limit": limit,
           **_result_columns(problem, result),
           "evaluations": outcome.evaluations, "wall_s": outcome.wall_s,
           "engine": spec.engine, "mode": spec.mode,
           "plan_file": f"plans/{name}/{index}.json" if plan is not None and feasible else "",
           "reason": "" if feasible else (result.reason if result is not None
                                          else outcome.notes.get("reason", ""))}
    return tid, row, (plan.to_json_dict() if plan is not None and feasible else None)


def _result_columns(problem: Problem, result) -> dict:
    """The row's numbers from a RunResult (None: the scheduler found no plan)."""
    from heterps_sim.studies.headline import single_type_throughput_at
    if result is None:
        return {"feasible": False, "cost_usd": math.inf, "throughput": 0.0, "hours": math.inf,
                "cost_per_hour": 0.0, "num_stages": 0, "num_units": 0, "units": "",
                "single_type_throughput_same_cost": math.nan}
    ok = bool(result.feasible)
    return {"feasible": ok, "cost_usd": result.cost_usd if ok else math.inf,
            "throughput": result.throughput, "hours": result.hours if ok else math.inf,
            "cost_per_hour": result.cost_per_hour, "num_stages": len(result.stages),
            "num_units": int(sum(result.units_per_type.values())),
            "units": ", ".join(f"{k} x{v}" for k, v in result.units_per_type.items()),
            "single_type_throughput_same_cost": single_type_throughput_at(
                problem, result.cost_per_hour)[0] if ok else math.nan}


def _single_type_costs(problem: Problem, limits, mode: str) -> list[float]:
    """The best one-type plan's cost at each limit (planner/baseline.py: the exact optimum
    restricted to one type, pipelines of it allowed, under the same pricing)."""
    from heterps_sim.planner import Pricing
    from heterps_sim.planner.baseline import one_type_baselines
    costs = []
    for limit in limits:
        at = problem.with_limit(limit)
        best = one_type_baselines(at, Pricing.of(at, provisioning=mode), one_stage=False).one_type
        costs.append(best.cost_usd if best is not None else math.inf)
    return costs


def run_sweep(problem: Problem, spec: SweepSpec, *, jobs: int = 1,
              progress: bool = True) -> SweepResult:
    """Every scheduler at every limit; rows in (scheduler, limit) order whatever `jobs` is."""
    from heterps_sim.util import progress as shown
    start = time.perf_counter()
    tasks = [(tid, index, name, limit, spec) for tid, (name, (index, limit)) in enumerate(
        (n, il) for n in spec.schedulers for il in enumerate(spec.limits))]
    out: list = [None] * len(tasks)
    bar = shown.bar(total=len(tasks), desc="tradeoff", unit="point", off=not progress)
    if jobs <= 1:
        _init_worker(problem)
        for task in tasks:
            out[task[0]] = _run_point(task)
            bar.update()
    else:
        # forkserver: workers start clean (fork after numba/OpenMP threads is unsafe) and
        # cheaper than spawn (the server imports once, then forks per worker).
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([__name__])
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_init_pool_worker,
                                 initargs=(problem, shown.enabled() and progress)) as pool:
            for fut in as_completed([pool.submit(_run_point, t) for t in tasks]):
                tid, row, plan = fut.result()
                out[tid] = (tid, row, plan)
                bar.update()
    bar.close()
    refs = _single_type_costs(problem, spec.limits, spec.mode)
    rows = [{**row, "single_type_cost_usd": refs[row["index"]]} for _, row, _ in out]
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return SweepResult(frame, tuple(plan for _, _, plan in out), time.perf_counter() - start)
