"""`rl`: the improved RL scheduler - a stage-by-stage LSTM policy, pre-trained by imitation of
exact optima, fine-tuned with PPO on the problem, decoded by sampling plus a local polish.

schedule(problem, evaluate):
  1. policy: the checkpoint shipped in the repository (`checkpoint="shipped"`, trained by
     train_rl.py on random problems, never on the benchmark's), a train_rl.py checkpoint
     file, or an untrained one (`"none"`);
  2. fine-tune: PPO on this problem for `train_seconds` (or `updates` updates, whichever
     comes first; train_rl.ppo_update), keeping the best plan sampled;
  3. decode: the greedy plan plus `decode_samples` sampled plans, costed in one batch;
  4. polish: best-improvement local search (polish.py) from the `polish_starts` best distinct
     plans, up to `polish_steps` moves each.
Returns the cheapest feasible plan seen, re-checked with `evaluate` (search_space.PlanBudget);
NoFeasiblePlan if none is. Every plan costed counts in `evaluate.count`. With `updates=0` (or
`train_seconds=0`) it decodes only: well under a second at 64 x 64 once torch is loaded.
The same seed and `updates` give the same plan; a run limited by `train_seconds` depends on
the machine's speed.
"""

from __future__ import annotations

import time

import numpy as np
from pydantic import Field

from ...plan import Plan
from ...problem import Problem
from ..base import Evaluator, SchedulerConfig


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
        epochs: int = Field(default=2, ge=1)
        """PPO passes over each batch."""
        clip: float = Field(default=0.2, gt=0)
        entropy: float = Field(default=0.003, ge=0)
        decode_samples: int = Field(default=256, ge=0)
        """Plans sampled from the final policy besides its greedy plan."""
        polish_starts: int = Field(default=8, ge=0)
        """Best distinct plans the local polish starts from (0: no polish)."""
        polish_steps: int = Field(default=100, ge=0)
        """Most improving moves per polish start."""
        max_shift: int = Field(default=2, ge=1)
        """Largest stage-boundary shift (layers) a polish move makes."""
        threads: int = Field(default=1, ge=1)
        """torch CPU threads while scheduling (restored afterwards)."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()
        self.notes: dict = {}

    def _policy(self, args):
        from .train_rl import SHIPPED, load_checkpoint, new_policy

        c = self.config
        if c.checkpoint == "none":
            return new_policy(args), "none"
        path = SHIPPED if c.checkpoint == "shipped" else c.checkpoint
        policy, trained = load_checkpoint(path)
        args.max_stage_layers = int(trained.get("max_stage_layers", args.max_stage_layers))
        return policy, str(path)

    def schedule(self, problem: Problem, evaluate: Evaluator) -> Plan:
        import torch

        from ..search_space import PlanBudget, SearchSpace
        from .polish import polish
        from .train_rl import Args, make_task, ppo

        c = self.config
        space = SearchSpace(problem)
        space.check()
        args = Args(seed=c.seed, batch=c.batch, lr=c.lr, epochs=c.epochs, clip=c.clip,
                    entropy=c.entropy, mode=evaluate.mode, threads=c.threads,
                    ppo_seconds=0.0 if c.updates == 0 else c.train_seconds,
                    ppo_updates=c.updates or 0)
        threads = torch.get_num_threads()
        torch.set_num_threads(c.threads)
        start = time.perf_counter()
        try:
            policy, source = self._policy(args)
            task = make_task(problem, args)
            setup_s = time.perf_counter() - start
            updates = ppo(policy, [task], args, lambda **row: None)
            train_s = time.perf_counter() - start - setup_s
            generator = torch.Generator().manual_seed(c.seed + 1)
            plans = [policy.sample(task.tensors, 1, greedy=True)[0]]
            if c.decode_samples:
                plans.append(policy.sample(task.tensors, c.decode_samples, generator)[0])
            if task.best_plan is not None:
                plans.append(task.best_plan[None, :])
            plans = np.concatenate(plans)
            decode_s = time.perf_counter() - start - setup_s - train_s
            evaluate.count += task.evaluations
            budget = PlanBudget(problem, evaluate, None)
            scores = budget.scores(plans)
            sampled_best = budget.best_cost
            stats = polish(space, budget, plans, scores, c.polish_starts, c.polish_steps,
                           c.max_shift) if c.polish_starts else {}
        finally:
            torch.set_num_threads(threads)
        self.notes = {"checkpoint": source, "updates": updates, "setup_s": setup_s,
                      "train_s": train_s,
                      "decode_s": decode_s, "greedy_score": float(scores[0]),
                      "best_sampled_cost_usd": sampled_best,
                      "best_training_cost_usd": task.best_cost,
                      "plans_costed": task.evaluations + budget.used,
                      "wall_s": time.perf_counter() - start, **stats}
        return budget.final_plan(self.name)
