"""Train HeterPS's LSTM scheduler with REINFORCE (the paper's recipe), CleanRL style.

    python -m heterps_sim.schedulers.rl.paper.train --problems scenarios/a.yaml scenarios/b.yaml \
        --seconds 60 --out ckpt.pt          # writes ckpt.pt and ckpt.csv (the training log)

One update: pick the next training problem (round robin), sample `batch` plans from the policy,
cost them all in one `cost_batch.evaluate_assignments` call, reward = -(cost / reference) with
a penalty when infeasible (reward.py), advantage = reward - a moving-average baseline (one per
problem), loss = -mean(advantage * log pi(plan)) - entropy * mean(entropy of the plan). The
best feasible plan ever sampled is kept per problem. Training stops after `seconds` of wall
time or `updates` updates, whichever comes first: a run limited by seconds depends on the
machine's speed; a run limited by updates is the same on every run with the same seed.
`heterps-sim train-rl` calls `main(argv)`; `RLPaperScheduler` calls `train(...)`.
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from tqdm import tqdm

from heterps_sim.core.files import UserFileError, run_command
from heterps_sim.core.flags import OneLineParser
from heterps_sim.core.problem import Problem
from heterps_sim.cost.batch import evaluate_assignments
from heterps_sim.cost.reference import MODES
from heterps_sim.schedulers.fields import add_flags, check_upper_bounds, plain_message
from heterps_sim.schedulers.rl.outcome import no_feasible_plan_exit
from heterps_sim.schedulers.rl.paper.features import FeatureNorm, encode
from heterps_sim.schedulers.rl.paper.policy import LSTMPolicy, ProblemTensors
from heterps_sim.schedulers.rl.reward import SCALES, reference_cost, rewards
from heterps_sim.util.progress import enabled as progress_shown

CHECKPOINT_FORMAT = "heterps-rl-paper/1"
LOG_COLUMNS = ("update", "wall_s", "problem", "reward_mean", "reward_max", "feasible_share",
               "best_cost_usd", "best_over_reference", "baseline", "entropy", "loss",
               "evaluations")


# ---------------------------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------------------------
class Args(BaseModel):
    """The training run's settings: each field is a --flag of `parse_args` (its docstring the
    help); bad values raise a ValueError naming the field."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)

    problems: list[str] = Field(default_factory=list)
    """scenario YAML / problem JSON files to train on (none: the built-in default scenario)"""
    seconds: float = 60.0
    """wall-clock training budget"""
    updates: int = 0
    """stop after this many updates as well (0: no cap); set it for reproducible runs"""
    out: str = "rl-paper.pt"
    """checkpoint written at the end (and every `save_every` updates)"""
    log: str = ""
    """CSV training log ("" = the checkpoint path with .csv)"""
    init: str = ""
    """checkpoint to start from (fine-tuning); its feature normalisation is kept"""
    seed: int = 0
    """seeds the policy's initial weights and the plan sampling"""
    hidden: int = 128
    """LSTM hidden size (paper: 128)"""
    embed: int = 64
    """size of the per-type embedding the shared scoring head reads"""
    lr: float = 3e-3
    """Adam learning rate (paper recipe: 3e-3)"""
    batch: int = 64
    """plans sampled per update (all costed in one evaluate_assignments call)"""
    entropy: float = 0.01
    """entropy bonus coefficient"""
    baseline_decay: float = 0.9
    """moving-average baseline: b <- decay * b + (1 - decay) * mean reward of the batch"""
    max_grad_norm: float = 1.0
    """gradient norm clip"""
    mode: str = "least"
    """provisioning mode of the cost model (least | exact)"""
    reward: str = "log"
    """reward scale: log = -ln(cost / reference), linear = -(cost / reference) (reward.py)"""
    threads: int = 1
    """torch CPU threads"""
    save_every: int = 0
    """also checkpoint every this many updates (0: only at the end)"""
    progress: bool = True
    """tqdm progress bar"""

    @model_validator(mode="after")
    def _check(self) -> Args:
        positive = {"lr": self.lr, "batch": self.batch, "hidden": self.hidden,
                    "embed": self.embed, "threads": self.threads,
                    "max_grad_norm": self.max_grad_norm}
        for name, value in positive.items():
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        for name in ("seconds", "updates", "entropy", "save_every"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        check_upper_bounds(self)
        if not 0 <= self.baseline_decay < 1:
            raise ValueError(f"baseline_decay must be in [0, 1), got {self.baseline_decay}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.reward not in SCALES:
            raise ValueError(f"reward must be one of {', '.join(SCALES)}, got {self.reward!r}")
        return self


# ---------------------------------------------------------------------------------------------
# One training problem and what is kept about it
# ---------------------------------------------------------------------------------------------
@dataclass
class Task:
    problem: Problem
    tensors: ProblemTensors
    reference: float
    baseline: float | None = None
    best_cost: float = float("inf")
    best_plan: np.ndarray | None = None
    evaluations: int = 0
    updates: int = 0


def make_task(problem: Problem, norm: FeatureNorm, mode: str) -> Task:
    reference, _ = reference_cost(problem, mode)
    return Task(problem, ProblemTensors.build(encode(problem), norm), reference)


def keep_best(task: Task, plans: np.ndarray, cost: np.ndarray) -> None:
    """Remember the cheapest feasible plan seen (ties: the first)."""
    i = int(np.argmin(cost))
    if np.isfinite(cost[i]) and cost[i] < task.best_cost:
        task.best_cost, task.best_plan = float(cost[i]), plans[i].copy()


def evaluate(problem: Problem, plans: np.ndarray, args: Args):
    """cost_batch on one batch of plans, on one numba thread (64 plans take ~0.1 ms; waking
    numba's pool on a busy 2-core box took ~15 ms), then torch's thread count put back:
    numba's OpenMP layer shares libgomp with torch and leaves torch at numba's thread count
    (measured here: the LSTM update then ran 20-40x slower)."""
    numba_threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        return evaluate_assignments(problem, plans, args.mode)
    finally:
        numba.set_num_threads(numba_threads)
        if torch.get_num_threads() != args.threads:
            torch.set_num_threads(args.threads)


# ---------------------------------------------------------------------------------------------
# The REINFORCE update
# ---------------------------------------------------------------------------------------------
def reinforce_step(policy: LSTMPolicy, optimizer: torch.optim.Optimizer, task: Task, args: Args,
                   generator: torch.Generator) -> dict:
    """Sample a batch of plans, cost them, take one policy-gradient step; returns log values."""
    plans = policy.sample(task.tensors, args.batch, generator)
    result = evaluate(task.problem, plans, args)
    task.evaluations += len(plans)
    task.updates += 1
    keep_best(task, plans, result.cost_usd)
    reward = rewards(task.problem, plans, result, task.reference, args.reward)
    baseline = float(reward.mean()) if task.baseline is None else task.baseline
    advantage = torch.as_tensor(reward - baseline, dtype=torch.float32)
    task.baseline = args.baseline_decay * baseline + (1 - args.baseline_decay) * float(reward.mean())

    logp, entropy = policy.log_prob(task.tensors, plans)
    loss = -(advantage * logp).mean() - args.entropy * entropy.mean()
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), args.max_grad_norm)
    optimizer.step()
    return dict(problem=task.problem.name, reward_mean=float(reward.mean()),
                reward_max=float(reward.max()), feasible_share=float(result.feasible.mean()),
                best_cost_usd=task.best_cost, best_over_reference=task.best_cost / task.reference,
                baseline=task.baseline, entropy=float(entropy.detach().mean()), loss=float(loss.detach()),
                evaluations=task.evaluations)


# ---------------------------------------------------------------------------------------------
# The training loop
# ---------------------------------------------------------------------------------------------
def train(policy: LSTMPolicy, tasks: list[Task], args: Args, norm: FeatureNorm | None = None,
          log_path: str | Path | None = None) -> dict:
    """Train in place until `args.seconds` or `args.updates`; returns {updates, wall_s}."""
    if args.seconds <= 0:  # decode only (and no optimizer: Adam's first use imports dynamo, ~1.5 s)
        return dict(updates=0, wall_s=0.0)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.lr)
    log_file = open(log_path, "w", newline="") if log_path else None  # noqa: SIM115
    writer = csv.DictWriter(log_file, LOG_COLUMNS) if log_file else None
    if writer:
        writer.writeheader()
    bar = tqdm(total=args.updates or None, unit="upd", desc="rl-paper", mininterval=0.5,
               disable=not (args.progress and progress_shown()))  # --quiet, no terminal: off
    start, update = time.perf_counter(), 0
    try:
        while time.perf_counter() - start < args.seconds and not (
                args.updates and update >= args.updates):
            task = tasks[update % len(tasks)]
            row = reinforce_step(policy, optimizer, task, args, generator)
            update += 1
            row.update(update=update, wall_s=round(time.perf_counter() - start, 4))
            if writer:
                writer.writerow(row)
            if args.save_every and norm is not None and update % args.save_every == 0:
                save_checkpoint(args.out, policy, norm, args)
            bar.update()
            bar.set_postfix(problem=row["problem"], best=f"{row['best_over_reference']:.3f}",
                            feasible=f"{row['feasible_share']:.2f}", refresh=False)
    finally:
        bar.close()
        if log_file:
            log_file.close()
    return dict(updates=update, wall_s=time.perf_counter() - start)


# ---------------------------------------------------------------------------------------------
# Checkpoints: the state dict + Args + feature normalisation
# ---------------------------------------------------------------------------------------------
def save_checkpoint(path: str | Path, policy: LSTMPolicy, norm: FeatureNorm, args: Args) -> None:
    torch.save({"format": CHECKPOINT_FORMAT, "state_dict": policy.state_dict(),
                "policy": {"hidden": policy.hidden, "embed": policy.embed},
                "feature_norm": norm.to_dict(), "args": args.model_dump()}, path)


def load_checkpoint(path: str | Path) -> tuple[LSTMPolicy, FeatureNorm, dict]:
    """(policy, feature normalisation, the Args it was trained with as a dict)."""
    data = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path}: not a {CHECKPOINT_FORMAT} checkpoint")
    policy = LSTMPolicy(**data["policy"])
    policy.load_state_dict(data["state_dict"])
    return policy, FeatureNorm.from_dict(data["feature_norm"]), data["args"]


def new_policy(args: Args, problems: list[Problem]) -> tuple[LSTMPolicy, FeatureNorm]:
    """A policy from `args.init`, or a fresh one (seeded) with norms fitted on `problems`."""
    if args.init:
        policy, norm, _ = load_checkpoint(args.init)
        return policy, norm
    torch.manual_seed(args.seed)
    return (LSTMPolicy(args.hidden, args.embed),
            FeatureNorm.fit([encode(p) for p in problems]))


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------
def parser() -> OneLineParser:
    """The command line: input files, then one flag per `Args` field (generated from it)."""
    ap = OneLineParser(
        prog="heterps-sim train-rl", description=__doc__.splitlines()[0],
        epilog="example: heterps-sim train-rl scenarios/dlrm-64types.yaml --seconds 60 "
               "--out dlrm.pt")
    ap.add_argument("inputs", nargs="*", help="scenario YAML / problem JSON files")
    ap.add_argument("--problems", nargs="+", default=[],  # at least one value, unlike the rest
                    help=Args.model_fields["problems"].description)
    add_flags(ap, Args, skip=("problems",))
    return ap


def parse_args(argv: list[str] | None = None) -> Args:
    ns = vars(parser().parse_args(argv))
    ns["problems"] = ns.pop("inputs") + ns["problems"]
    try:
        return Args(**ns)
    except ValidationError as exc:  # the validator's sentence, as the dataclass raised it
        raise ValueError(plain_message(exc)) from None


def main(argv: list[str] | None = None) -> int:
    """Train from the command line `argv`; bad input is one line on stderr, exit 2, worded
    as every heterps-sim command words it (`heterps-sim train-rl: FILE: FIELD: problem`)."""
    return run_command("heterps-sim", "train-rl", lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    from heterps_sim.inputs.load import (  # scenario parsing: the command line only
        InputError,
        load_input,
    )

    try:
        args = parse_args(argv)
        problems = [load_input(p).problem for p in args.problems] or [load_input(None).problem]
        policy, norm = new_policy(args, problems)
    except (InputError, ValueError, OSError) as exc:
        raise UserFileError(str(exc)) from None
    tasks = [make_task(p, norm, args.mode) for p in problems]
    log = args.log or str(Path(args.out).with_suffix(".csv"))
    stats = train(policy, tasks, args, norm, log)
    save_checkpoint(args.out, policy, norm, args)
    for task in tasks:
        print(f"{task.problem.name or '?'}: best sampled cost {task.best_cost:.6g} USD "
              f"({task.best_cost / task.reference:.4f} x the reference), "
              f"{task.updates} updates, {task.evaluations} plans")
    print(f"{stats['updates']} updates in {stats['wall_s']:.1f} s; wrote {args.out} and {log}")
    return no_feasible_plan_exit(tasks)


if __name__ == "__main__":
    raise SystemExit(main())
