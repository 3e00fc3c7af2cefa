"""`rl-paper`: HeterPS's scheduler as published - an LSTM policy trained with REINFORCE.

schedule(problem, evaluate): start from `checkpoint` (fine-tune) or a fresh policy, train on
this problem for `train_seconds` (or `updates` updates, whichever comes first) with the paper's
recipe (schedulers/rl/paper/train.py), then decode: the final policy's greedy plan plus `decode_samples` sampled
plans. Returns the cheapest feasible plan ever sampled (training or decode). Every plan costed
(64 per update, one `evaluate_assignments` call each) counts in `evaluate.count` (added with `evaluate.counted`). Raises
NoFeasiblePlan if no plan was feasible. `updates=0` with a checkpoint: decode only (~0.05 s at
64 x 64 once torch and numba are loaded).

Reproducibility: the same seed and the same number of updates give the same plan (set
`updates` and a generous `train_seconds`); a run limited by `train_seconds` does as many
updates as the machine manages, so its plan depends on the machine's speed.
A checkpoint trained on any problems works for any L and M (per-type features, shared
scoring head; see schedulers/rl/paper/policy.py); its feature normalisation is reused as saved.
"""

from __future__ import annotations

import time

import numpy as np
from pydantic import Field

from heterps_sim.core.plan import Plan, plan_from_assignment
from heterps_sim.core.problem import Problem
from heterps_sim.schedulers.base import Evaluator, NoFeasiblePlan, SchedulerConfig


class RLPaperScheduler:
    name = "rl-paper"

    class Config(SchedulerConfig):
        train_seconds: float = Field(default=20.0, ge=0)
        """Wall-clock training (or fine-tuning) budget on the problem."""
        updates: int | None = Field(default=None, ge=0)
        """Stop after this many updates too (None: no cap); set it for reproducible plans."""
        checkpoint: str | None = None
        """A schedulers/rl/paper/train.py checkpoint to fine-tune from (None: train from scratch)."""
        hidden: int = Field(default=128, ge=1)
        """LSTM hidden size (ignored with a checkpoint: its own is used)."""
        lr: float = Field(default=3e-3, gt=0)
        """Adam learning rate (paper recipe: 3e-3)."""
        batch: int = Field(default=64, ge=1)
        """Plans sampled per update."""
        entropy: float = Field(default=0.01, ge=0)
        """Entropy bonus coefficient."""
        baseline_decay: float = Field(default=0.9, ge=0, lt=1)
        """Moving-average reward baseline: b <- decay x b + (1 - decay) x the batch's mean."""
        threads: int = Field(default=1, ge=1)
        """torch CPU threads while scheduling (restored afterwards)."""
        decode_samples: int = Field(default=64, ge=0)
        """Plans sampled from the final policy (besides its greedy decode), costed in one
        call; with a checkpoint and updates=0 this is the whole decode."""
        progress: bool = False
        """Show a tqdm progress bar."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()
        self.notes: dict = {}

    def schedule(self, problem: Problem, evaluate: Evaluator) -> Plan:
        import torch

        from heterps_sim.schedulers.rl.paper.train import (
            Args,
            keep_best,
            make_task,
            new_policy,
            train,
        )
        from heterps_sim.schedulers.rl.paper.train import evaluate as evaluate_batch

        c = self.config
        if c.checkpoint:  # a user's file: one line when it is not a checkpoint
            from heterps_sim.schedulers.rl.checkpoint_file import check_policy_checkpoint
            from heterps_sim.schedulers.rl.paper import train as trainer
            check_policy_checkpoint(c.checkpoint, trainer, "--set checkpoint")
        args = Args(seconds=c.train_seconds, updates=c.updates or 0, init=c.checkpoint or "",
                    seed=c.seed, hidden=c.hidden, lr=c.lr, batch=c.batch, entropy=c.entropy,
                    baseline_decay=c.baseline_decay, mode=evaluate.mode, threads=c.threads,
                    progress=c.progress)
        if c.updates == 0:
            args.seconds = 0.0  # decode only
        threads = torch.get_num_threads()
        torch.set_num_threads(c.threads)
        start = time.perf_counter()
        try:
            policy, norm = new_policy(args, [problem])
            task = make_task(problem, norm, evaluate.mode)
            stats = train(policy, [task], args)
            best_trained = task.best_cost
            generator = torch.Generator().manual_seed(c.seed + 1)
            final = np.concatenate([policy.sample(task.tensors, 1, greedy=True),
                                    policy.sample(task.tensors, c.decode_samples, generator)])
            costs = evaluate_batch(problem, final, args).cost_usd
        finally:
            torch.set_num_threads(threads)
        task.evaluations += len(final)
        keep_best(task, final, costs)
        evaluate.counted(task.evaluations)
        wall = time.perf_counter() - start
        self.notes = {"updates": stats["updates"], "train_s": stats["wall_s"],
                      "updates_per_s": stats["updates"] / max(stats["wall_s"], 1e-9),
                      "plans_costed": task.evaluations, "greedy_cost_usd": float(costs[0]),
                      "best_training_cost_usd": best_trained,
                      "best_final_sample_cost_usd": float(costs[1:].min(initial=np.inf)),
                      "reference_cost_usd": task.reference,
                      "checkpoint": c.checkpoint, "wall_s": wall}
        if task.best_plan is None:
            raise NoFeasiblePlan(f"rl-paper sampled {task.evaluations} plans in "
                                 f"{stats['updates']} updates and none met the throughput limit")
        return plan_from_assignment(problem.layer_names, problem.type_names, task.best_plan)
