"""rl-paper (LSTM + REINFORCE): optimal on tiny problems, never below the exact optimum,
reproducible for a fixed number of updates, checkpoints that round-trip and transfer across
problem sizes, and the training command's log. Budgets are capped by `updates` so results do
not depend on the machine's speed."""

import csv
import math
import subprocess
import sys

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from heterps_sim.core.problem import save_problem
from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.schedulers.base import Evaluator, NoFeasiblePlan, run_scheduler
from heterps_sim.schedulers.exact.sweep import ExactScheduler
from heterps_sim.schedulers.rl.paper import features
from heterps_sim.schedulers.rl.paper.policy import ProblemTensors, dynamic
from heterps_sim.schedulers.rl.paper.scheduler import RLPaperScheduler
from heterps_sim.schedulers.rl.paper.train import (
    LOG_COLUMNS,
    Args,
    load_checkpoint,
    main,
    make_task,
    new_policy,
    save_checkpoint,
    train,
)
from heterps_sim.testing import random_problem

QUICK = dict(train_seconds=600, updates=25)


def rl(**options) -> RLPaperScheduler:
    return RLPaperScheduler(RLPaperScheduler.Config(**{**QUICK, **options}))


def feasible_tiny(n: int, seed: int = 0, num_layers: int = 4, num_types: int = 3):
    """n tiny random problems that have a feasible plan."""
    rng, out = np.random.default_rng(seed), []
    while len(out) < n:
        p = random_problem(rng, num_layers, num_types, caps=len(out) % 2 == 1,
                           limit_quantile=float(rng.choice([0.5, 2.0, 5.0])))
        try:
            ExactScheduler().schedule(p, Evaluator(p))
        except NoFeasiblePlan:
            continue
        out.append(p)
    return out


def test_finds_the_exact_optimum_on_tiny_problems_and_never_beats_it():
    for p in feasible_tiny(6):
        exact = run_scheduler(ExactScheduler(), p)
        got = run_scheduler(rl(), p)
        assert got.plan.problems(p.layer_names, p.type_names) == []
        assert got.result.feasible
        assert got.result.cost_usd >= exact.result.cost_usd * (1 - 1e-9)
        assert got.result.cost_usd == pytest.approx(exact.result.cost_usd, rel=1e-9)


def test_counts_every_costed_plan_and_records_notes():
    p = feasible_tiny(1, seed=1)[0]
    scheduler = rl(updates=4, batch=16, decode_samples=8)
    evaluate = Evaluator(p)
    scheduler.schedule(p, evaluate)
    assert evaluate.count == 4 * 16 + 1 + 8  # training samples, greedy decode, final samples
    assert scheduler.notes["updates"] == 4 and scheduler.notes["plans_costed"] == 73


def test_same_seed_same_updates_same_plan():
    p = random_problem(np.random.default_rng(9), 10, 6, limit_quantile=2.0)
    runs = [run_scheduler(rl(updates=8, seed=s), p) for s in (3, 3, 4)]
    assert runs[0].plan == runs[1].plan
    assert runs[0].notes["best_training_cost_usd"] == runs[1].notes["best_training_cost_usd"]
    assert runs[0].notes["greedy_cost_usd"] == runs[1].notes["greedy_cost_usd"]


def test_raises_when_no_sampled_plan_is_feasible():
    p = feasible_tiny(1)[0].with_limit(1e30)
    with pytest.raises(NoFeasiblePlan, match="none met the throughput limit"):
        rl(updates=2).schedule(p, Evaluator(p))


def test_config_is_validated():
    with pytest.raises(ValidationError):
        RLPaperScheduler.Config(hiden=64)
    with pytest.raises(ValidationError):
        RLPaperScheduler.Config(lr=0)


def test_dynamic_features_agree_in_numpy_and_torch():
    p = random_problem(np.random.default_rng(2), 5, 4, unrunnable=0.3)
    enc = features.encode(p)
    pt = ProblemTensors.build(enc, features.FeatureNorm.fit([enc]))
    for layer, prev in [(0, None), (2, 1), (4, 3)]:
        want = features.dynamic_features(enc, layer, prev)
        got = dynamic(pt, torch.tensor([layer]), torch.tensor([-1 if prev is None else prev]))
        np.testing.assert_allclose(got[0].numpy(), want, rtol=1e-5, atol=1e-6)


def test_masked_types_are_never_sampled():
    p = random_problem(np.random.default_rng(4), 6, 5, caps=True, unrunnable=0.4)
    p = p.__class__(**{**{f: getattr(p, f) for f in p.__dataclass_fields__},
                       "available": (0,) + p.available[1:]})
    args = Args(progress=False)
    policy, norm = new_policy(args, [p])
    task = make_task(p, norm, "least")
    plans = policy.sample(task.tensors, 256, torch.Generator().manual_seed(0))
    mask = features.action_mask(p)
    assert not mask[:, 0].any()
    assert mask[np.arange(p.num_layers)[None, :], plans].all()


def test_checkpoint_round_trip_and_transfer_to_other_sizes(tmp_path):
    train_set = feasible_tiny(2, num_layers=5, num_types=4)
    args = Args(updates=6, seconds=600, progress=False, out=str(tmp_path / "c.pt"))
    policy, norm = new_policy(args, train_set)
    train(policy, [make_task(p, norm, "least") for p in train_set], args, norm)
    save_checkpoint(args.out, policy, norm, args)
    loaded, norm2, saved_args = load_checkpoint(args.out)
    assert saved_args["updates"] == 6 and norm2.to_dict() == norm.to_dict()
    for p in train_set + feasible_tiny(1, seed=5, num_layers=9, num_types=6):
        a = policy.sample(make_task(p, norm, "least").tensors, 1, greedy=True)
        b = loaded.sample(make_task(p, norm2, "least").tensors, 1, greedy=True)
        assert np.array_equal(a, b) and a.shape == (1, p.num_layers)
    # decode-only (updates=0) and a short fine-tune, on a problem of another L and M
    other = feasible_tiny(1, seed=7, num_layers=7, num_types=5)[0]
    for updates in (0, 3):
        plan = rl(checkpoint=args.out, updates=updates).schedule(other, Evaluator(other))
        assert plan.problems(other.layer_names, other.type_names) == []
        assert evaluate_plan(other, plan).feasible


def test_train_command_writes_checkpoint_and_log(tmp_path):
    paths = []
    for i, p in enumerate(feasible_tiny(2, seed=3)):
        paths.append(str(tmp_path / f"p{i}.json"))
        save_problem(p, paths[-1])
    out = tmp_path / "ckpt.pt"
    assert main([paths[0], "--problems", paths[1], "--seconds", "600", "--updates", "4",
                 "--out", str(out), "--no-progress"]) == 0
    rows = list(csv.DictReader(open(tmp_path / "ckpt.csv")))
    assert len(rows) == 4 and tuple(rows[0]) == LOG_COLUMNS
    assert [r["problem"] for r in rows] == ["random"] * 4 and all(
        math.isfinite(float(r["reward_mean"])) for r in rows)
    load_checkpoint(out)
    assert main([str(tmp_path / "missing.yaml"), "--out", str(out)]) == 2
    assert main([paths[0], "--mode", "fastest", "--out", str(out)]) == 2
    with pytest.raises(ValueError, match="batch must be > 0"):
        Args(batch=0)


def test_rl_package_imports_neither_torch_nor_gymnasium():
    code = ("import sys, heterps_sim.schedulers.rl, heterps_sim.schedulers.rl.paper.features, "
            "heterps_sim.schedulers.rl.reward; "
            "print([m for m in ('torch', 'gymnasium') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    code = ("import sys, heterps_sim.schedulers.rl.paper.env; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_reach_is_the_reference_models_amdahl_limit():
    from heterps_sim.core.plan import plan_from_assignment
    from heterps_sim.cost.reference import plan_stages
    from heterps_sim.schedulers.rl.reward import reach

    rng = np.random.default_rng(0)
    for _ in range(20):
        p = random_problem(rng, int(rng.integers(1, 8)), int(rng.integers(1, 5)), unrunnable=0.0)
        plans = rng.integers(0, p.num_types, (10, p.num_layers))
        for a, got in zip(plans, reach(p, plans)):
            terms = plan_stages(p, plan_from_assignment(p.layer_names, p.type_names, a))
            assert got == pytest.approx(min(p.batch_size / t.min_exec_time() for t in terms),
                                        rel=1e-9)
