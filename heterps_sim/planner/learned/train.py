"""Train the learned spot policy in the simulator: REINFORCE on simulated jobs.

    python -m heterps_sim.planner.learned.train --seconds 600 --workers 2 --out spot-policy.pt

Each update rolls out `workers` training cases at once, one per process (family.case: a random
problem and spot market; seeds below family.VALIDATION_SEEDS, so no validation or evaluation
case is ever trained on). For each case a worker samples `samples` decisions from the policy
(policy.act_on) and scores each by `jobs` simulated jobs (decide.Case.score: the step-level
simulator with jitter and stragglers, then the job-level one with the market's reclaims,
checkpoints and restarts; the same seeds for every decision of the case). The learner replays
the decisions' log-probabilities from what the policy read (Rollout) and takes one Adam step on
the cases' mean of -(advantage x log-probability) - entropy_bonus x entropy, the advantage
being the reward standardised over the case's decisions (one reward per decision, no critic).
Training stops at `seconds` or `updates`, whichever comes first (set `updates` for runs that
repeat exactly; the result does not depend on how the cases were spread over processes). The
CSV log beside the checkpoint has one row per case.
"""

from __future__ import annotations

import csv
import math
import pickle
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from heterps_sim.core.files import UserFileError, run_command
from heterps_sim.core.flags import OneLineParser
from heterps_sim.planner.learned.decide import Case
from heterps_sim.planner.learned.family import VALIDATION_SEEDS, case
from heterps_sim.planner.learned.policy import Rollout, SpotPolicy, act_on, inputs_of
from heterps_sim.schedulers.fields import add_flags, plain_message

FORMAT = "heterps-spot-policy/1"
SHIPPED = Path(__file__).with_name("spot-policy.pt")
"""The checkpoint shipped in the repository (docs/guide/spot.md says how it was trained)."""
SEEDS_PER_RUN = 100_000
"""Training run `seed` draws its cases from seeds seed x SEEDS_PER_RUN on."""


class Args(BaseModel):
    """The training run's settings (each field a --flag)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)

    out: str = "spot-policy.pt"
    """checkpoint written at the end (a CSV log beside it)"""
    init: str = ""
    """checkpoint to start from ("" = a fresh policy, "shipped" = the shipped one)"""
    seed: int = Field(default=0, ge=0, le=9)
    """seeds the weights, the training cases and the sampling"""
    hidden: int = Field(default=32, ge=4, le=256)
    """LSTM hidden size"""
    seconds: float = Field(default=600.0, ge=0, le=86_400)
    """wall-clock budget of the REINFORCE phase"""
    imitation_cases: int = Field(default=0, ge=0, le=100_000)
    """training cases labelled by a search in the simulator and imitated first (0: none)"""
    imitation_epochs: int = Field(default=30, ge=1, le=10_000)
    """passes over the labels"""
    labels: str = ""
    """pickle of the labels of this seed and jobs: read, extended when it holds fewer than
    imitation_cases, and written back ("" = not kept)"""
    updates: int = Field(default=0, ge=0, le=1_000_000)
    """cap on updates (0: none)"""
    samples: int = Field(default=8, ge=2, le=256)
    """decisions sampled per case"""
    jobs: int = Field(default=10, ge=2, le=1000)
    """simulated jobs per decision"""
    lr: float = Field(default=3e-3, gt=0, le=1)
    """Adam learning rate"""
    entropy_bonus: float = Field(default=0.01, ge=0, le=10)
    """weight of the entropy bonus"""
    threads: int = Field(default=1, ge=1, le=64)
    """torch threads of the learner"""
    workers: int = Field(default=1, ge=1, le=64)
    """cases rolled out at once per update, one per process (each on one thread)"""


def load_policy(path: str | Path) -> SpotPolicy:
    """A checkpoint written by `train` (or SHIPPED)."""
    try:
        data = torch.load(Path(path), map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as exc:
        raise UserFileError(f"{path}: not a spot-policy checkpoint ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UserFileError(f"{path}: format: not a spot-policy checkpoint ({FORMAT})")
    policy = SpotPolicy(hidden=int(data["hidden"]))
    policy.load_state_dict(data["state_dict"])
    policy.eval()
    return policy


def trained_stats(path: str | Path) -> dict:
    """What the checkpoint says about its training (updates, wall time, jobs simulated)."""
    return dict(torch.load(Path(path), map_location="cpu", weights_only=True)["trained"])


def rollout(job) -> Rollout | None:
    """Sample `samples` decisions for one case and score each by `jobs` simulated jobs (None:
    the case has no plan on demand, or its plan does not run). Runs in a worker process."""
    state, hidden, case_seed, samples, jobs, gen_seed = job
    torch.set_num_threads(1)
    policy = SpotPolicy(hidden=hidden)
    policy.load_state_dict(state)
    policy.eval()
    problem, market = case(case_seed)
    c = Case(problem, market, seeds=jobs)
    if not c.feasible or not math.isfinite(c.reference):  # no plan, or it does not run
        return None
    inp = inputs_of(c)
    gen = torch.Generator().manual_seed(gen_seed)
    with torch.no_grad():
        steps = [act_on(policy, inp, generator=gen) for _ in range(samples)]
    scored = [c.score(s.decision) for s in steps]
    return Rollout(
        case_seed, inp.types.numpy(), inp.case.numpy(), inp.offered.numpy(), inp.names,
        {(s.decision.spot, s.decision.headroom):
         None if s.stages is None else s.stages.numpy() for s in steps},
        [s.decision for s in steps], [x.reward for x in scored], [x.holds for x in scored],
        c.jobs, c.jobs * problem.num_samples)


def train(args: Args, log=None, *, processes: int | None = None) -> tuple[SpotPolicy, dict]:
    """Train; `log(row)` gets one dict per case. Returns the policy and its statistics. Each
    update rolls out `workers` cases at once, then takes one Adam step on their losses
    together; `processes` (default: workers) is how many processes run them, which the result
    does not depend on."""
    torch.manual_seed(args.seed)
    policy = load_policy(SHIPPED if args.init == "shipped" else args.init) if args.init \
        else SpotPolicy(hidden=args.hidden)
    policy.train()
    opt = torch.optim.Adam(policy.parameters(), lr=args.lr)
    start = time.perf_counter()
    next_seed, updates, jobs, samples_simulated, skipped, cases = \
        args.seed * SEEDS_PER_RUN, 0, 0, 0.0, 0, 0
    processes = args.workers if processes is None else processes
    pool = ProcessPoolExecutor(processes) if processes > 1 else None
    imitation = {}
    try:
        if args.imitation_cases:
            labels, used, made = _labels(args, pool)
            jobs += sum(r.jobs for r in made)  # the jobs this run simulated (not a file's)
            samples_simulated += sum(r.simulated_samples for r in made)
            labelled_s = time.perf_counter() - start
            from heterps_sim.planner.learned.imitation import imitate
            loss = imitate(policy, labels, epochs=args.imitation_epochs, seed=args.seed)
            policy.train()
            imitation = {"cases": len(labels), "labelled_here": len(made),
                         "seeds_drawn": used, "label_s": labelled_s,
                         "wall_s": time.perf_counter() - start, "last_loss": loss}
        rl_start = time.perf_counter()
        while time.perf_counter() - rl_start < args.seconds and (not args.updates
                                                               or updates < args.updates):
            seeds = list(range(next_seed, next_seed + args.workers))
            next_seed += args.workers
            if next_seed >= VALIDATION_SEEDS:
                raise ValueError("training ran into the validation and held-out cases' seeds")
            state = {k: v.detach().clone() for k, v in policy.state_dict().items()}
            work = [(state, policy.hidden, s, args.samples, args.jobs,
                     args.seed * 1_000_003 + s) for s in seeds]
            results = list(pool.map(rollout, work)) if pool else [rollout(w) for w in work]
            losses = []
            for r in results:
                if r is None:
                    skipped += 1
                    continue
                cases += 1
                jobs += r.jobs
                samples_simulated += r.simulated_samples
                rewards = torch.tensor(r.rewards, dtype=torch.float32)
                std = float(rewards.std())
                if std > 1e-9:
                    inp = r.inputs()
                    steps = [act_on(policy, inp, given=d) for d in r.decisions]
                    adv = (rewards - rewards.mean()) / std
                    logp = torch.stack([s.log_prob for s in steps])
                    ent = torch.stack([s.entropy for s in steps])
                    losses.append(-(adv * logp).mean() - args.entropy_bonus * ent.mean())
                if log is not None:
                    log({"update": updates + 1, "case_seed": r.case_seed,
                         "wall_s": round(time.perf_counter() - start, 3),
                         "reward_mean": float(rewards.mean()),
                         "reward_best": float(rewards.max()),
                         "holds_share": float(np.mean(r.holds)),
                         "loss": float(losses[-1].detach()) if std > 1e-9 else 0.0,
                         "jobs": jobs})
            updates += 1
            if losses:
                opt.zero_grad()
                torch.stack(losses).mean().backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
                opt.step()
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    wall = time.perf_counter() - start
    policy.eval()
    stats = {"updates": updates, "cases": cases, "cases_skipped": skipped, "wall_s": wall,
             "jobs": jobs, "simulated_samples": samples_simulated,
             "jobs_per_s": jobs / wall if wall > 0 else math.nan,
             "simulated_samples_per_s": samples_simulated / wall if wall > 0 else math.nan,
             "imitation": imitation, "args": args.model_dump()}
    return policy, stats


IMITATION_OFFSET = 50_000
"""Imitation labels come from a run's seeds seed x SEEDS_PER_RUN + this on (REINFORCE's from
seed x SEEDS_PER_RUN on), so the two phases see different cases."""


def _labels(args: Args, pool) -> tuple[list, int, list]:
    """The first `imitation_cases` training cases with a plan, from the run's imitation seeds
    on, each labelled by imitation.search_label; the seeds drawn; the labels made here. A
    labels file of the same seed and jobs is read and, when it holds fewer, extended (a label
    depends on its case's seed alone, so the same labels as made at once)."""
    from heterps_sim.planner.learned.imitation import search_label
    key = (args.seed, args.jobs)
    first = args.seed * SEEDS_PER_RUN + IMITATION_OFFSET
    labels: list = []
    if args.labels and Path(args.labels).exists():
        with open(args.labels, "rb") as fh:
            stored = pickle.load(fh)
        if stored.get("key") == key:
            labels = stored["labels"]
    seed = labels[-1].case_seed + 1 if labels else first
    made: list = []
    while len(labels) < args.imitation_cases:
        want = args.imitation_cases - len(labels)
        seeds = list(range(seed, seed + max(want, args.workers)))
        got = (list(pool.map(search_label, seeds, [args.jobs] * len(seeds))) if pool
               else [search_label(s, args.jobs) for s in seeds])
        kept = [r for r in got if r is not None][:want]
        labels += kept
        made += kept
        seed = kept[-1].case_seed + 1 if len(kept) == want else seed + len(seeds)
    if args.labels:
        with open(args.labels, "wb") as fh:
            pickle.dump({"key": key, "labels": labels}, fh)
    labels = labels[:args.imitation_cases]
    return labels, labels[-1].case_seed + 1 - first, made


def save(path: str | Path, policy: SpotPolicy, stats: dict) -> None:
    torch.save({"format": FORMAT, "hidden": policy.hidden, "state_dict": policy.state_dict(),
                "trained": stats}, Path(path))


def parse_args(argv: list[str] | None = None) -> Args:
    parser = OneLineParser(prog="python -m heterps_sim.planner.learned.train",
                           description="Train the learned spot policy in the simulator.")
    add_flags(parser, Args)
    ns = vars(parser.parse_args(argv))
    try:
        return Args(**ns)
    except ValidationError as exc:
        raise ValueError(plain_message(exc)) from None


def main(argv: list[str] | None = None) -> int:
    return run_command("python -m heterps_sim.planner.learned.train", "", lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    try:
        args = parse_args(argv)
    except ValueError as exc:
        raise UserFileError(str(exc)) from None
    out = Path(args.out)
    if not out.parent.is_dir():
        raise UserFileError(f"{out}: out: its folder does not exist")
    torch.set_num_threads(args.threads)
    log_path = out.with_suffix(".csv")
    with open(log_path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, ["update", "case_seed", "wall_s", "reward_mean",
                                     "reward_best", "holds_share", "loss", "jobs"])
        writer.writeheader()
        policy, stats = train(args, lambda row: (writer.writerow(row), fh.flush()))
    save(out, policy, stats)
    if stats["imitation"]:
        im = stats["imitation"]
        print(f"imitation: {im['cases']} cases labelled by a search in the simulator "
              f"({im['labelled_here']} here, in {im['label_s']:.1f} s; the rest read from "
              f"{args.labels or '-'}), imitated to a loss of {im['last_loss']:.3f}")
    print(f"{stats['updates']} updates in {stats['wall_s']:.1f} s: {stats['jobs']:,} jobs "
          f"simulated ({stats['jobs_per_s']:.1f} jobs/s, {stats['simulated_samples_per_s']:.3g} "
          f"training samples simulated per second); wrote {out} and {log_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
