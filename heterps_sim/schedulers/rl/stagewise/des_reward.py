"""The DES reward of `rl --set reward=des`: judge a plan by the simulator, not the analytic model.

    judge = DesJudge(problem, mode="least", effects="contention,stragglers,ps", seeds=(0,))
    v = judge(assignment)       # DesVerdict: DES cost, throughput, feasible, units per stage
    judge.scores(plans)         # (N,) cost where DES-feasible, graded penalty where not

Throughput-constrained cost under the DES: provision the plan as the analytic model does
(`cost.evaluate_plan`, the evaluator's mode), simulate it (`des.simulate`, the given effects,
`steps` steps, each seed in `seeds`, the mean over seeds); if the simulated throughput misses
the limit TL, provision again for a raised limit TL x (TL / simulated) and simulate again, up to
`reprovision` times (a plan whose stage no number of units rescues, e.g. one bound by its
all-reduce or by a PS shard, stays infeasible). The verdict is the last run's: the DES cost
(hours at the simulated throughput x the plan's price per hour) and the units it used.
The analytic model decomposes per stage; the effects that make this differ from it (shared
network interfaces, PS shards, stragglers among a stage's units, all-reduces) do not.

The simulator is ~1,000-100,000x slower than the batch evaluator, so verdicts are cached by
assignment and callers judge only a few plans: the analytic model pre-filters (the scheduler
simulates the `des_top` analytically cheapest distinct plans of a batch, see schedulers/rl/stagewise/scheduler.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from heterps_sim.core.plan import Plan, plan_from_assignment
from heterps_sim.core.problem import Problem
from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.schedulers.search.space import INFEASIBLE

DEFAULT_EFFECTS = "contention,stragglers,ps"
"""Effects the DES reward turns on unless told otherwise: the ones that do not decompose."""


@dataclass(frozen=True, slots=True)
class DesVerdict:
    """What the simulator says about one type assignment."""

    cost: float
    """mean DES cost (USD) over the seeds; inf when the analytic model cannot run the plan"""
    throughput: float
    """mean simulated throughput (samples/s)"""
    feasible: bool
    """the mean simulated throughput meets the limit"""
    replicas: tuple[int, ...]
    """units per stage of the judged run"""
    simulations: int
    """simulator runs this verdict took (seeds x provisioning rounds)"""

    def score(self, limit: float) -> float:
        """Cost when feasible, else INFEASIBLE x (1 + shortfall): lower is better."""
        if self.feasible:
            return self.cost
        reach = self.throughput / limit if limit > 0 else 0.0
        return INFEASIBLE * (1.0 + min(10.0, -math.log(max(reach, 1e-300))))


class DesJudge:
    """Throughput-constrained DES cost of assignments, cached (see the module docstring)."""

    def __init__(self, problem: Problem, mode: str = "least",
                 effects: str | frozenset[str] = DEFAULT_EFFECTS, steps: int = 6,
                 seeds: tuple[int, ...] = (0,), reprovision: int = 3) -> None:
        from heterps_sim.des import DesOptions

        if not seeds:
            raise ValueError("the DES reward needs at least one seed")
        self.problem, self.mode, self.seeds = problem, mode, tuple(seeds)
        self.options = DesOptions(effects=effects, num_steps=steps)
        self.reprovision = reprovision
        self.simulations = 0
        self._cache: dict[bytes, DesVerdict] = {}

    def __len__(self) -> int:
        return len(self._cache)

    def seen(self, assignment: np.ndarray) -> bool:
        return np.asarray(assignment, np.int16).tobytes() in self._cache

    def plan(self, assignment: np.ndarray) -> Plan:
        p = self.problem
        return plan_from_assignment(p.layer_names, p.type_names, np.asarray(assignment))

    def __call__(self, assignment: np.ndarray) -> DesVerdict:
        key = np.asarray(assignment, np.int16).tobytes()
        if key not in self._cache:
            self._cache[key] = self._judge(self.plan(assignment))
            self.simulations += self._cache[key].simulations
        return self._cache[key]

    def scores(self, plans: np.ndarray) -> np.ndarray:
        """(N,) DesVerdict.score per plan (lower is better)."""
        limit = self.problem.throughput_limit
        return np.array([self(row).score(limit) for row in np.asarray(plans)], np.float64)

    def judged_plan(self, assignment: np.ndarray) -> Plan:
        """The plan with the units its verdict was simulated with (simulate reproduces it)."""
        return self.plan(assignment).with_replicas(list(self(assignment).replicas))

    def _judge(self, plan: Plan) -> DesVerdict:
        from heterps_sim.des import simulate

        problem, limit = self.problem, self.problem.throughput_limit
        target, runs = limit, 0
        verdict = DesVerdict(math.inf, 0.0, False, (), 0)
        for _ in range(1 + self.reprovision):
            analytic = evaluate_plan(problem.with_limit(target), plan, self.mode)
            if not analytic.feasible:
                break  # no units meet the raised limit (caps, Amdahl): keep the last verdict
            ks = [s.num_replicas for s in analytic.stages]
            fixed = plan.with_replicas(ks)
            results = [simulate(problem, fixed, seed=s, options=self.options,
                                record_spans=False).result for s in self.seeds]
            runs += len(results)
            thr = float(np.mean([r.throughput for r in results]))
            cost = float(np.mean([r.cost_usd for r in results]))
            verdict = DesVerdict(cost, thr, thr >= limit * (1 - 1e-9), tuple(ks), runs)
            if verdict.feasible or thr <= 0:
                break
            target = target * limit / thr * (1 + 1e-6)
        return DesVerdict(verdict.cost, verdict.throughput, verdict.feasible, verdict.replicas,
                          runs)


def des_rewards(judge: DesJudge, plans: np.ndarray, analytic_cost: np.ndarray, reference: float,
                top: int) -> tuple[np.ndarray, np.ndarray]:
    """(reward, judged mask) per plan for PPO: the `top` analytically cheapest distinct feasible
    plans are simulated and score -ln(DES cost / reference) (graded penalty when the DES says
    infeasible); the others keep their analytic cost x the median DES / analytic ratio of the
    judged ones (a surrogate, so the batch stays on one scale). Infeasible analytic plans get
    the DES-infeasible penalty's floor.
    """
    cost = np.asarray(analytic_cost, np.float64)
    n = len(plans)
    judged = np.zeros(n, bool)
    keys: dict[bytes, int] = {}
    for i in np.argsort(cost, kind="stable"):
        if not np.isfinite(cost[i]) or len(keys) >= top:
            break
        keys.setdefault(np.asarray(plans[i], np.int16).tobytes(), i)
    limit = judge.problem.throughput_limit
    reward = np.full(n, _penalty(0.0, limit))
    ratios = []
    for i in range(n):
        key = np.asarray(plans[i], np.int16).tobytes()
        if key in keys:
            v = judge(plans[i])
            judged[i] = True
            reward[i] = -math.log(v.cost / reference) if v.feasible else \
                _penalty(v.throughput, limit)
            if v.feasible:
                ratios.append(v.cost / cost[i])
    inflate = float(np.median(ratios)) if ratios else 1.0
    rest = ~judged & np.isfinite(cost)
    reward[rest] = -np.log(cost[rest] * inflate / reference)
    return reward, judged


def _penalty(throughput: float, limit: float) -> float:
    """Reward of a DES-infeasible plan: below any feasible one's, higher the nearer TL."""
    from heterps_sim.schedulers.rl.reward import RATIO_CAP

    shortfall = min(10.0, -math.log(max(throughput / limit, 1e-300)))
    return -math.log(RATIO_CAP["log"]) - 1.0 - shortfall

