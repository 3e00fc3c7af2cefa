"""Train the improved `rl` policy: imitation of exact optima, then PPO, CleanRL style.

    python -m heterps_sim.schedulers.rl.stagewise.train --imitation-problems 600 \
        --imitation-seconds 300 --ppo-seconds 0 --out rl.pt     # the shipped checkpoint

1. Imitation (pre-training): `imitation_problems` random problems (schedulers/rl/stagewise/imitation.py, seeded) are
   solved exactly; the policy learns to reproduce each optimum stage by stage (cross-entropy
   of the optimum's decisions, teacher forcing), `imitation_batch` problems per Adam step.
   With `dagger_rounds`, each round then labels the state where the greedy plan first leaves
   its teachers' stages with the exact optimum of the rest (imitation.completion) and runs
   `dagger_updates` more steps over all sequences (DAgger).
2. PPO (fine-tuning on the true objective): per update, sample `batch` plans of one problem,
   cost them in one `cost_batch.evaluate_assignments` call, reward = -ln(cost / reference)
   with the graded infeasibility penalty (reward.py), advantage = the reward standardised
   over the batch (no critic: one reward per plan), then `epochs` passes of the clipped
   surrogate min(r A, clip(r, 1 - clip, 1 + clip) A) per decision, minus an entropy bonus.
   The best feasible plan ever sampled is kept per problem.
Each phase stops at its seconds or its update cap (set the caps for runs that repeat exactly).
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass, field
from pathlib import Path

import numba
import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from heterps_sim.core.files import UserFileError, run_command
from heterps_sim.core.flags import OneLineParser
from heterps_sim.core.problem import Problem
from heterps_sim.cost.batch import evaluate_assignments
from heterps_sim.cost.reference import MODES
from heterps_sim.schedulers.fields import add_flags, check_upper_bounds, plain_message
from heterps_sim.schedulers.rl.outcome import no_feasible_plan_exit
from heterps_sim.schedulers.rl.reward import reference_cost, rewards
from heterps_sim.schedulers.rl.stagewise.des_reward import DEFAULT_EFFECTS, DesJudge, des_rewards
from heterps_sim.schedulers.rl.stagewise.imitation import SIZES, solved_problems
from heterps_sim.schedulers.rl.stagewise.policy import SegmentPolicy
from heterps_sim.schedulers.rl.stagewise.segments import (
    assignment_to_segments,
    encode_segments,
    fits,
)
from heterps_sim.schedulers.rl.stagewise.tensors import SegmentTensors

REWARDS = ("analytic", "des")
CHECKPOINT_FORMAT = "heterps-rl/1"
SHIPPED = Path(__file__).with_name("rl-pretrained.pt")
"""The checkpoint shipped in the repository (see the README for how it was trained)."""


class Args(BaseModel):
    """The training run's settings: each field is a --flag of `parse_args` (its docstring the
    help); bad values raise a ValueError naming the field."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)

    out: str = "rl.pt"
    """checkpoint written at the end (a CSV log beside it)"""
    init: str = ""
    """checkpoint to start from ("" = a fresh policy, "shipped" = rl-pretrained.pt)"""
    seed: int = 0
    """seeds the weights, the training problems and the plan sampling"""
    hidden: int = 64
    """LSTM hidden size"""
    embed: int = 16
    """candidate embedding size (the query . embedding score)"""
    encoder: int = 32
    """hidden width of the candidate-feature MLP"""
    max_stage_layers: int = 64
    """longest stage a decision may build"""
    imitation_problems: int = 0
    """random problems solved exactly and imitated (0: no imitation phase)"""
    imitation_seconds: float = 60.0
    """wall-clock budget of the imitation phase"""
    imitation_updates: int = 0
    """cap on imitation Adam steps (0: none)"""
    imitation_batch: int = 8
    """problems per imitation step"""
    imitation_sizes: str = ""
    """comma list of layer counts of the imitation problems ("" = problems.SIZES, 4-64)"""
    imitation_lr: float = 3e-3
    """imitation Adam learning rate"""
    dagger_rounds: int = 0
    """DAgger rounds after imitation: each decodes every imitation problem greedily and,
    where the plan leaves the teacher's, adds the exact optimum of the rest from the first
    stage it chose differently (stagewise.imitation.completion), then imitates"""
    dagger_updates: int = 1000
    """imitation steps after each DAgger round (over the teachers' and the rounds' sequences)"""
    problems: list[str] = Field(default_factory=list)
    """scenario / problem files for the PPO phase (none: the imitation problems)"""
    ppo_seconds: float = 0.0
    """wall-clock budget of the PPO phase (0: no PPO phase)"""
    ppo_updates: int = 0
    """cap on PPO updates (0: none)"""
    lr: float = 1e-3
    """PPO Adam learning rate"""
    batch: int = 64
    """plans sampled per PPO update"""
    epochs: int = 2
    """PPO passes over each batch"""
    clip: float = 0.2
    """PPO clip range: the probability ratio is clipped to [1 - clip, 1 + clip]"""
    entropy: float = 0.003
    """entropy bonus coefficient"""
    max_grad_norm: float = 1.0
    """gradient norm clip"""
    mode: str = "least"
    """provisioning mode of the cost model (least | exact)"""
    reward: str = "analytic"
    """PPO reward: analytic (the batch cost model) | des (the simulator ranks the best plans
    of each batch, schedulers/rl/stagewise/des_reward.py; slow: keep ppo batches small)"""
    effects: str = DEFAULT_EFFECTS
    """des reward: simulator effects (none | all | comma list)"""
    des_steps: int = 6
    """des reward: training steps simulated per plan"""
    des_seeds: str = "0"
    """des reward: comma list of simulator seeds (the verdict is their mean)"""
    des_top: int = 4
    """des reward: plans of each batch simulated (the analytically cheapest distinct ones)"""
    threads: int = 1
    """torch CPU threads"""

    @model_validator(mode="after")
    def _check(self) -> Args:
        for name in ("hidden", "embed", "encoder", "max_stage_layers", "imitation_batch",
                     "batch", "epochs", "threads", "lr", "imitation_lr", "clip"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("imitation_problems", "imitation_seconds", "imitation_updates",
                     "dagger_rounds", "dagger_updates",
                     "ppo_seconds", "ppo_updates", "entropy"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        check_upper_bounds(self)
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.reward not in REWARDS:
            raise ValueError(f"reward must be one of {', '.join(REWARDS)}, got {self.reward!r}")
        if self.reward == "des":
            self.judge_settings()  # unknown effects or bad seeds fail here, not mid-run
            if self.des_steps < 1 or self.des_top < 1:
                raise ValueError("des_steps and des_top must be >= 1")
        return self

    def judge_settings(self) -> dict:
        """DesJudge keyword arguments of the des reward."""
        from heterps_sim.des import parse_effects

        try:
            seeds = tuple(int(x) for x in str(self.des_seeds).split(",") if x.strip())
        except ValueError:
            raise ValueError(f"des_seeds must be a comma list of integers, got "
                             f"{self.des_seeds!r}") from None
        if not seeds:
            raise ValueError("des_seeds must name at least one seed")
        return dict(effects=parse_effects(self.effects), steps=self.des_steps, seeds=seeds)


@dataclass
class Task:
    """One problem, its candidates and what training keeps about it."""

    problem: Problem
    tensors: SegmentTensors
    reference: float
    teacher: tuple[np.ndarray, np.ndarray] | None = None
    best_cost: float = float("inf")
    best_plan: np.ndarray | None = None
    evaluations: int = 0
    extra: list = field(default_factory=list)
    """DAgger's sequences: (starts, slots, first), the loss on decisions from `first` on (the
    exact optimum of the rest after the policy's own first stages)"""
    judge: DesJudge | None = None
    """with the DES reward: the simulator's verdicts (schedulers/rl/stagewise/des_reward.py); best_* are then DES"""
    des_top: int = 4
    """plans of each batch the judge simulates (the analytically cheapest distinct ones)"""


def make_task(problem: Problem, args: Args, optimum: np.ndarray | None = None) -> Task:
    enc = encode_segments(problem, args.max_stage_layers)
    tensors = SegmentTensors.build(enc)
    teacher = None
    if optimum is not None:
        segs = assignment_to_segments(optimum)
        if fits(enc, segs):
            teacher = tensors.decisions(segs)
    judge = (DesJudge(problem, args.mode, **args.judge_settings()) if args.reward == "des"
             else None)
    return Task(problem, tensors, reference_cost(problem, args.mode)[0], teacher, judge=judge,
                des_top=args.des_top)


def evaluate(problem: Problem, plans: np.ndarray, mode: str, threads: int):
    """cost_batch on one numba thread, torch's thread count put back (see train.evaluate)."""
    numba_threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        return evaluate_assignments(problem, plans, mode)
    finally:
        numba.set_num_threads(numba_threads)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)


# ---------------------------------------------------------------------------------------------
# Phase 1: imitation of exact optima
# ---------------------------------------------------------------------------------------------
def imitate(policy: SegmentPolicy, tasks: list[Task], args: Args, log,
            updates: int | None = None) -> int:
    """Cross-entropy on the teachers' decisions and DAgger's (each task's teacher, loss on every
    decision, and its `extra` sequences, loss from their `first` decision on), `imitation_batch`
    sequences per Adam step, until imitation_seconds or `updates` (default imitation_updates)."""
    seqs = [(t, *t.teacher, 0) for t in tasks if t.teacher is not None]
    seqs += [(t, *x) for t in tasks for x in t.extra]
    cap = args.imitation_updates if updates is None else updates
    if not seqs or args.imitation_seconds <= 0 or (updates is not None and updates <= 0):
        return 0
    opt = torch.optim.Adam(policy.parameters(), lr=args.imitation_lr)
    # the first phase draws as it always did (the shipped checkpoint's command reproduces it)
    rng = np.random.default_rng(args.seed if updates is None else [args.seed, len(seqs)])
    start, step = time.perf_counter(), 0
    while time.perf_counter() - start < args.imitation_seconds and not (cap and step >= cap):
        opt.zero_grad()
        total, hits = 0.0, 0
        for i in rng.choice(len(seqs), size=min(args.imitation_batch, len(seqs)), replace=False):
            task, starts, slots, first = seqs[i]
            _, logp, _ = policy.log_prob(task.tensors, starts, slots)
            logp = logp[first:]
            loss = -logp.mean() / args.imitation_batch
            loss.backward()
            total += float(loss.detach()) * args.imitation_batch
            hits += int((logp > np.log(0.5)).all())
        torch.nn.utils.clip_grad_norm_(policy.parameters(), args.max_grad_norm)
        opt.step()
        step += 1
        log(phase="imitation", update=step, wall_s=round(time.perf_counter() - start, 3),
            loss=total / args.imitation_batch, teacher_argmax_share=hits / args.imitation_batch)
    return step


def dagger_round(policy: SegmentPolicy, tasks: list[Task], args: Args) -> int:
    """One DAgger round: each task's greedy plan; where it first leaves the teacher's (the
    teacher's own or a sequence a round added), the exact optimum of the rest after the
    policy's stages up to there (imitation.completion) is added to the task's `extra`.
    Returns the sequences added."""
    from heterps_sim.schedulers.rl.stagewise.imitation import completion
    added = 0
    for task in tasks:
        if task.teacher is None:
            continue
        with torch.no_grad():
            plan, starts, slots = policy.sample(task.tensors, 1, greedy=True)
        mine = assignment_to_segments(plan[0])
        known = [assignment_to_segments(task.tensors.assignments(s, c)[0])
                 for s, c in [task.teacher] + [(s, c) for s, c, _ in task.extra]]
        if mine in known:
            continue  # the policy already follows one of its teachers
        # the shortest prefix of its stages that no teacher shares
        cut = next(k for k in range(1, len(mine) + 1)
                   if all(seq[:k] != mine[:k] for seq in known))
        rest = completion(task.problem, mine[:cut], args.mode)
        if rest is None:
            continue
        try:
            task.extra.append((*task.tensors.decisions(mine[:cut] + rest), cut))
        except ValueError:  # a stage of the optimum longer than the policy may build
            continue
        added += 1
    return added


# ---------------------------------------------------------------------------------------------
# Phase 2: PPO on the true objective
# ---------------------------------------------------------------------------------------------
def ppo_update(policy: SegmentPolicy, opt, task: Task, args: Args, gen: torch.Generator) -> dict:
    plans, starts, actions = policy.sample(task.tensors, args.batch, gen)
    result = evaluate(task.problem, plans, args.mode, args.threads)
    task.evaluations += len(plans)
    if task.judge is None:
        i = int(np.argmin(result.cost_usd))
        if result.cost_usd[i] < task.best_cost:
            task.best_cost, task.best_plan = float(result.cost_usd[i]), plans[i].copy()
        reward = rewards(task.problem, plans, result, task.reference)
    else:
        reward, judged = des_rewards(task.judge, plans, result.cost_usd, task.reference,
                                     task.des_top)
        keep_best_des(task, plans[judged])
    adv = torch.as_tensor((reward - reward.mean()) / (reward.std() + 1e-8), dtype=torch.float32)
    regret = policy.regret(task.tensors, starts, actions)  # no gradient: computed once
    with torch.no_grad():
        rows, old, _ = policy.log_prob(task.tensors, starts, actions, regret)
    for _ in range(args.epochs):
        rows, logp, ent = policy.log_prob(task.tensors, starts, actions, regret)
        ratio = torch.exp(logp - old)
        a = adv[rows]
        surrogate = torch.minimum(ratio * a, ratio.clamp(1 - args.clip, 1 + args.clip) * a)
        loss = -surrogate.mean() - args.entropy * ent.mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), args.max_grad_norm)
        opt.step()
    return dict(reward_mean=float(reward.mean()), feasible_share=float(result.feasible.mean()),
                best_over_reference=task.best_cost / task.reference, loss=float(loss.detach()),
                entropy=float(ent.detach().mean()))


def keep_best_des(task: Task, plans: np.ndarray) -> None:
    """Keep the plan the DES judges cheapest (feasible) among `plans` (already judged)."""
    for row in plans:
        v = task.judge(row)
        if v.feasible and v.cost < task.best_cost:
            task.best_cost, task.best_plan = v.cost, row.copy()


def ppo(policy: SegmentPolicy, tasks: list[Task], args: Args, log) -> int:
    if not tasks or args.ppo_seconds <= 0:
        return 0
    opt = torch.optim.Adam(policy.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(args.seed)
    start, update = time.perf_counter(), 0
    while time.perf_counter() - start < args.ppo_seconds and not (
            args.ppo_updates and update >= args.ppo_updates):
        row = ppo_update(policy, opt, tasks[update % len(tasks)], args, gen)
        update += 1
        log(phase="ppo", update=update, wall_s=round(time.perf_counter() - start, 3), **row)
    return update


# ---------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------
def new_policy(args: Args) -> SegmentPolicy:
    if args.init:
        return load_checkpoint(args.init)[0]
    torch.manual_seed(args.seed)
    return SegmentPolicy(args.hidden, args.embed, args.encoder)


def save_checkpoint(path: str | Path, policy: SegmentPolicy, args: Args) -> None:
    state = {k: v.to(torch.float16) if v.is_floating_point() else v
             for k, v in policy.state_dict().items()}
    torch.save({"format": CHECKPOINT_FORMAT, "state_dict": state,
                "policy": {"hidden": policy.hidden, "embed": policy.embed,
                           "encoder": policy.encoder},
                "args": args.model_dump()}, path)


def load_checkpoint(path: str | Path) -> tuple[SegmentPolicy, dict]:
    """(policy, the Args it was trained with as a dict); weights are stored as float16."""
    data = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path}: not a {CHECKPOINT_FORMAT} checkpoint")
    policy = SegmentPolicy(**data["policy"])
    policy.load_state_dict({k: v.float() for k, v in data["state_dict"].items()})
    return policy, data["args"]


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------
def parser() -> OneLineParser:
    """The command line: input files, then one flag per `Args` field (generated from it)."""
    ap = OneLineParser(
        prog="heterps-sim train-rl --scheduler rl", description=__doc__.splitlines()[0],
        epilog="example: heterps-sim train-rl --scheduler rl scenarios/dlrm-64types.yaml "
               "--init shipped --ppo-seconds 30 --out tuned.pt")
    ap.add_argument("inputs", nargs="*", help="scenario YAML / problem JSON files (PPO phase)")
    add_flags(ap, Args)
    return ap


def parse_args(argv: list[str] | None = None) -> Args:
    ns = vars(parser().parse_args(argv))
    ns["problems"] = ns.pop("inputs") + ns["problems"]
    if ns["init"] == "shipped":
        ns["init"] = str(SHIPPED)
    try:
        return Args(**ns)
    except ValidationError as exc:  # the validator's sentence, as the dataclass raised it
        raise ValueError(plain_message(exc)) from None


def main(argv: list[str] | None = None) -> int:
    """Train from the command line `argv`; bad input is one line on stderr, exit 2, worded
    as every heterps-sim command words it (`heterps-sim train-rl: FILE: FIELD: problem`)."""
    return run_command("heterps-sim", "train-rl", lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    from heterps_sim.inputs.load import InputError, load_input

    try:
        args = parse_args(argv)
        files = [load_input(p).problem for p in args.problems]
    except (InputError, ValueError, OSError) as exc:
        raise UserFileError(str(exc)) from None
    from heterps_sim.util import progress

    torch.set_num_threads(args.threads)
    policy = new_policy(args)
    start = time.perf_counter()
    solved = [make_task(p, args, best) for p, best in
              solved_problems(args.seed, args.imitation_problems, args.mode,
                              [int(x) for x in args.imitation_sizes.split(",") if x.strip()]
                              or SIZES)]
    print(f"{len(solved)} problems solved exactly in {time.perf_counter() - start:.1f} s")
    log_path = Path(args.out).with_suffix(".csv")
    with open(log_path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, ["phase", "update", "wall_s", "loss", "teacher_argmax_share",
                                     "reward_mean", "feasible_share", "best_over_reference",
                                     "entropy"], extrasaction="ignore")
        writer.writeheader()
        bar = progress.bar(desc="train-rl", unit="update")  # off with --quiet or no terminal

        def log(**row):
            writer.writerow(row)
            bar.update(1)
            bar.set_postfix(phase=row["phase"], loss=f"{row.get('loss', 0.0):.3g}",
                            refresh=False)

        steps = imitate(policy, solved, args, log)
        for r in range(args.dagger_rounds):
            added = dagger_round(policy, solved, args)
            print(f"DAgger round {r + 1}: {added} sequences added")
            steps += imitate(policy, solved, args, log, updates=args.dagger_updates)
        tasks = [make_task(p, args) for p in files] or solved
        updates = ppo(policy, tasks, args, log)
        bar.close()
    save_checkpoint(args.out, policy, args)
    for task in [t for t in tasks if t.evaluations][:20]:
        best = f"{task.best_cost:.6g} USD" if task.best_plan is not None else "none feasible"
        print(f"{task.problem.name or '?'}: best sampled plan {best} "
              f"({'DES' if task.judge else 'analytic'}), {task.evaluations} plans costed")
    print(f"{steps} imitation steps, {updates} PPO updates in "
          f"{time.perf_counter() - start:.1f} s; wrote {args.out} and {log_path}")
    return no_feasible_plan_exit(tasks)


if __name__ == "__main__":
    raise SystemExit(main())
