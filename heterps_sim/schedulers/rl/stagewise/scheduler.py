"""`rl`: the improved RL scheduler - a stage-by-stage LSTM policy, pre-trained by imitation of
exact optima, fine-tuned with PPO on the problem, decoded by sampling plus a local polish.

schedule(problem, evaluate):
  1. policy: the checkpoint shipped in the repository (`checkpoint="shipped"`, trained by
     schedulers/rl/stagewise/train.py on random problems, never on the benchmark's), a schedulers/rl/stagewise/train.py checkpoint
     file, or an untrained one (`"none"`);
  2. fine-tune: PPO on this problem for `train_seconds` (or `updates` updates, whichever
     comes first; train_rl.ppo_update), keeping the best plan sampled;
  3. decode: the greedy plan plus `decode_samples` sampled plans, costed in one batch, from
     the fine-tuned policy and (when it was fine-tuned) from the policy it started from, so
     fine-tuning never loses the zero-shot decode's plans; and (`untrained_starts`) from a
     freshly initialised, seeded policy;
  4. polish: best-improvement local search (schedulers/search/polish.py) from the `polish_starts` best distinct
     plans, up to `polish_steps` moves each; at each local optimum also the compound moves
     that raise the bottleneck level (schedulers/search/level_moves.py) and re-partition windows of
     `polish_window` stages (schedulers/search/window_moves.py).
Returns the cheapest feasible plan seen, re-checked with `evaluate` (search_space.PlanBudget);
NoFeasiblePlan if none is.

With `reward="des"` the simulator judges instead (schedulers/rl/stagewise/des_reward.py: the plan provisioned as the
analytic model does, re-provisioned while the DES misses the limit, its DES cost over
`des_seeds`): PPO rewards the `des_top` analytically cheapest distinct plans of each batch by
their DES cost; at decode, after the analytic polish, the `des_candidates` analytically
cheapest distinct plans seen (with the best plan of training and the polish's local optima)
are simulated, then `des_polish_steps` steps of DES descent (polish.des_descend) start from
the DES-cheapest. The plan returned carries the units the DES judged it with (num_replicas),
so `des.simulate(problem, plan)` reproduces the verdict; notes record its DES cost. Every plan costed counts in `evaluate.count`. With `updates=0` (or
`train_seconds=0`) it decodes only: well under a second at 64 x 64 once torch is loaded.
The same seed and `updates` give the same plan; a run limited by `train_seconds` depends on
the machine's speed.
"""

from __future__ import annotations

import time
from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.schedulers.base import Evaluator, SchedulerConfig
from heterps_sim.schedulers.rl.stagewise.des_reward import DEFAULT_EFFECTS
from heterps_sim.schedulers.search.space import INFEASIBLE


class RLScheduler:
    name = "rl"

    class Config(SchedulerConfig):
        checkpoint: str = "shipped"
        """"shipped" (the repository's pre-trained policy), "none" (untrained), or a path."""
        train_seconds: float = Field(default=10.0, ge=0)
        """PPO fine-tuning budget on the problem (wall clock)."""
        updates: int | None = Field(default=None, ge=0)
        """Stop fine-tuning after this many PPO updates too (None: no cap; 0: decode only)."""
        batch: int = Field(default=64, ge=2)
        """Plans sampled per PPO update."""
        lr: float = Field(default=1e-3, gt=0)
        """PPO Adam learning rate."""
        epochs: int = Field(default=2, ge=1)
        """PPO passes over each batch."""
        clip: float = Field(default=0.2, gt=0)
        """PPO clip range: the probability ratio is clipped to [1 - clip, 1 + clip]."""
        entropy: float = Field(default=0.003, ge=0)
        """Entropy bonus coefficient."""
        decode_samples: int = Field(default=256, ge=0)
        """Plans sampled from the final policy besides its greedy plan."""
        polish_starts: int = Field(default=8, ge=0)
        """Best distinct plans the local polish starts from (0: no polish)."""
        polish_steps: int = Field(default=100, ge=0)
        """Most improving moves per polish start."""
        max_shift: int = Field(default=2, ge=1)
        """Largest stage-boundary shift (layers) a polish move makes."""
        polish_splits: bool = True
        """Polish moves also recolour any prefix or suffix of a stage (polish.split_moves)."""
        polish_levels: bool = True
        """At a local optimum, polish also tries the compound moves that raise the bottleneck
        level (schedulers/search/level_moves.py)."""
        level_span: int = Field(default=3, ge=1, le=6)
        """Level moves re-cut groups of 1 and of this many consecutive stages."""
        untrained_starts: bool = True
        """Also decode an untrained policy (seeded; greedy + decode_samples) and polish from
        its best plans: on 64 x 64 problems its samples start the compound moves in better
        basins than the imitation policy's (README, RL section)."""
        polish_window: int = Field(default=2, ge=0, le=3)
        """At a local optimum, polish also re-partitions every window of this many stages
        (schedulers/search/window_moves.py; 0: off)."""
        threads: int = Field(default=1, ge=1)
        """torch CPU threads while scheduling (restored afterwards)."""
        reward: Literal["analytic", "des"] = "analytic"
        """What ranks plans: the analytic model, or the simulator (schedulers/rl/stagewise/des_reward.py; slow)."""
        effects: str = DEFAULT_EFFECTS
        """des: simulator effects (none | all | comma list, des.EFFECTS)."""
        des_steps: int = Field(default=6, ge=2)
        """des: training steps simulated per plan (a quarter of them warm-up)."""
        des_seeds: list[int] = Field(default=[0], min_length=1)
        """des: simulator seeds; a verdict is the mean over them."""
        des_top: int = Field(default=4, ge=1)
        """des: plans of each PPO batch simulated (the analytically cheapest distinct)."""
        des_candidates: int = Field(default=16, ge=1)
        """des: analytically cheapest distinct plans simulated at decode."""
        des_polish_steps: int = Field(default=4, ge=0)
        """des: steps of DES descent from the DES-cheapest candidate."""
        des_polish_top: int = Field(default=8, ge=1)
        """des: neighbours simulated per DES descent step (analytically cheapest first)."""

        @field_validator("effects")
        @classmethod
        def _known_effects(cls, v: str) -> str:
            from heterps_sim.des.options import parse_effects
            parse_effects(v)  # raises ValueError naming the unknown effect
            return v

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()
        self.notes: dict = {}

    def _policy(self, args):
        from heterps_sim.schedulers.rl.stagewise.train import SHIPPED, load_checkpoint, new_policy

        c = self.config
        if c.checkpoint == "none":
            return new_policy(args), "none"
        path = SHIPPED if c.checkpoint == "shipped" else c.checkpoint
        if c.checkpoint != "shipped":  # a user's file: one line when it is not a checkpoint
            from heterps_sim.schedulers.rl.checkpoint_file import check_policy_checkpoint
            from heterps_sim.schedulers.rl.stagewise import train
            check_policy_checkpoint(path, train, "--set checkpoint")
        policy, trained = load_checkpoint(path)
        args.max_stage_layers = int(trained.get("max_stage_layers", args.max_stage_layers))
        return policy, str(path)

    def _compound(self, space) -> list:
        """The polish's compound moves (schedulers/search/level_moves.py, schedulers/search/window_moves.py) this config turns on."""
        from heterps_sim.schedulers.search.level_moves import StageOptions, level_moves
        from heterps_sim.schedulers.search.window_moves import window_moves

        opts, c, out = StageOptions(space), self.config, []
        if c.polish_levels:
            out.append(lambda a: level_moves(opts, a, span=c.level_span))
        if c.polish_window:
            out.append(lambda a: window_moves(opts, a, c.polish_window))
        return out

    def _decode(self, policy, task) -> list[np.ndarray]:
        """The policy's greedy plan and `decode_samples` sampled plans (seeded)."""
        import torch

        generator = torch.Generator().manual_seed(self.config.seed + 1)
        plans = [policy.sample(task.tensors, 1, greedy=True)[0]]
        if self.config.decode_samples:
            plans.append(policy.sample(task.tensors, self.config.decode_samples, generator)[0])
        return plans

    def schedule(self, problem: Problem, evaluate: Evaluator) -> Plan:
        import torch

        from heterps_sim.schedulers.rl.stagewise.train import Args, make_task, new_policy, ppo
        from heterps_sim.schedulers.search.polish import polish
        from heterps_sim.schedulers.search.space import PlanBudget, SearchSpace
        from heterps_sim.util import progress

        c = self.config
        space = SearchSpace(problem)
        space.check()
        args = Args(seed=c.seed, batch=c.batch, lr=c.lr, epochs=c.epochs, clip=c.clip,
                    entropy=c.entropy, mode=evaluate.mode, threads=c.threads,
                    ppo_seconds=0.0 if c.updates == 0 else c.train_seconds,
                    ppo_updates=c.updates or 0, reward=c.reward, effects=c.effects,
                    des_steps=c.des_steps, des_seeds=",".join(map(str, c.des_seeds)),
                    des_top=c.des_top)
        threads = torch.get_num_threads()
        torch.set_num_threads(c.threads)
        start = time.perf_counter()
        try:
            policy, source = self._policy(args)
            task = make_task(problem, args)
            setup_s = time.perf_counter() - start
            plans = self._decode(policy, task) if args.ppo_seconds > 0 else []
            with progress.clock(args.ppo_seconds, "rl: fine-tuning the policy (PPO)") as tick:
                updates = ppo(policy, [task], args,
                              lambda **row: tick(row["wall_s"], updates=row["update"]))
            train_s = time.perf_counter() - start - setup_s
            greedy_at = sum(len(x) for x in plans)  # the fine-tuned policy's greedy plan
            plans += self._decode(policy, task)
            if task.best_plan is not None:
                plans.append(task.best_plan[None, :])
            bounds = [0, greedy_at] if greedy_at else [0]
            bounds.append(sum(len(x) for x in plans))
            if c.untrained_starts and c.checkpoint != "none":
                plans += self._decode(new_policy(args), task)
                bounds.append(sum(len(x) for x in plans))
            plans = np.concatenate(plans)
            decode_s = time.perf_counter() - start - setup_s - train_s
            evaluate.counted(task.evaluations)
            budget = PlanBudget(problem, evaluate, None)
            scores = budget.scores(plans)
            sampled_best = budget.best_cost
            stats, ends = {}, []
            compound = self._compound(space)
            # Polish from the best starts of each decode separately (the starting policy's
            # first, if fine-tuned; an untrained policy's last), so fine-tuning can only add
            # to the zero-shot result and each decode gets its own starts.
            parts = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
            if c.polish_starts:
                progress.phase(f"rl: polishing the best {c.polish_starts} plans of each of "
                               f"{len(parts)} decodes ({len(plans)} plans)")
            for part in parts if c.polish_starts else ():
                more, reached = polish(space, budget, plans[part], scores[part],
                                       c.polish_starts, c.polish_steps, c.max_shift,
                                       c.polish_splits, compound)
                stats = {k: stats.get(k, 0) + v if k in ("polish_starts", "polish_steps")
                         else stats.get(k, v) for k, v in more.items()}
                ends += reached
            if stats:
                stats["best_after_polish"] = budget.best_cost
            if task.judge is not None:
                return self._des_decode(problem, space, budget, task, plans, ends, stats,
                                        dict(updates=updates, setup_s=setup_s, train_s=train_s,
                                             decode_s=decode_s, source=source, start=start))
        finally:
            torch.set_num_threads(threads)
        self.notes = {"checkpoint": source, "updates": updates, "setup_s": setup_s,
                      "train_s": train_s,
                      "decode_s": decode_s, "greedy_score": float(scores[greedy_at]),
                      "best_sampled_cost_usd": sampled_best,
                      "best_training_cost_usd": task.best_cost,
                      "plans_costed": task.evaluations + budget.used,
                      "wall_s": time.perf_counter() - start, **stats}
        return budget.final_plan(self.name)

    def _des_decode(self, problem: Problem, space, budget, task, plans, ends, stats,
                    info: dict) -> Plan:
        """Simulate the analytically best candidates, descend by the DES, return the winner
        with the units it was judged with."""
        from heterps_sim.schedulers.base import NoFeasiblePlan
        from heterps_sim.schedulers.search.polish import des_descend

        c, judge = self.config, task.judge
        pool = [plans] + [np.asarray(e)[None, :] for e in ends]
        pool += [row[None, :] for _, row in budget.top]
        pool = np.concatenate(pool)
        keys = {np.asarray(r, np.int16).tobytes(): r for r in pool}
        rows = np.array(list(keys.values()))
        analytic = budget.scores(rows)
        order = np.argsort(analytic, kind="stable")[:c.des_candidates]
        candidates = [rows[i] for i in order if analytic[i] < INFEASIBLE]
        if task.best_plan is not None:
            candidates.append(task.best_plan)
        if not candidates:
            budget.final_plan(self.name)  # raises NoFeasiblePlan with the nearest miss
        des = judge.scores(np.array(candidates))
        best = candidates[int(np.argmin(des))]
        best, score, steps = des_descend(space, budget, judge, best, c.des_polish_steps,
                                         c.des_polish_top, c.max_shift, c.polish_splits)
        verdict = judge(best)
        self.notes = {"checkpoint": info["source"], "reward": "des",
                      "effects": c.effects, "updates": info["updates"],
                      "setup_s": info["setup_s"], "train_s": info["train_s"],
                      "decode_s": info["decode_s"], "des_plans_judged": len(judge),
                      "des_simulations": judge.simulations, "des_polish_steps": steps,
                      "des_cost_usd": verdict.cost, "des_throughput": verdict.throughput,
                      "des_feasible": verdict.feasible,
                      "analytic_cost_usd": float(budget.scores(best[None, :])[0]),
                      "best_analytic_cost_usd": budget.best_cost,
                      "plans_costed": task.evaluations + budget.used,
                      "wall_s": time.perf_counter() - info["start"], **stats}
        if not verdict.feasible:
            raise NoFeasiblePlan(f"{self.name}: none of the {len(judge)} plans simulated meets "
                                 f"the throughput limit under the DES ({c.effects}); the "
                                 f"nearest reached {verdict.throughput:.6g} samples/s")
        return judge.judged_plan(best)
