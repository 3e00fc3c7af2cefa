"""`rl --set reward=des`: the simulator, not the analytic model, ranks the plans.

The oracle: a 2-layer x 2-type problem whose 4 assignments are all judged by brute force. The
cheap, slow type needs 4 units, and its layers carry large dense parameters that its units
all-reduce every step; the analytic model leaves the all-reduce out (so it prefers the cheap
type), the DES with the `allreduce` effect does not (so only the fast type meets the limit).
"""

import itertools
import json

import numpy as np
import pytest

from heterps_sim.cli import main
from heterps_sim.core.problem import Problem
from heterps_sim.cost.batch import evaluate_assignments
from heterps_sim.des import DesOptions, simulate
from heterps_sim.schedulers.base import run_scheduler
from heterps_sim.schedulers.registry import make_scheduler
from heterps_sim.schedulers.rl.stagewise.des_reward import DesJudge, des_rewards
from heterps_sim.schedulers.rl.stagewise.imitation import plan_assignment as assignment_of
from heterps_sim.schedulers.rl.stagewise.train import Args

EFFECTS = "allreduce"


@pytest.fixture(scope="module")
def toy() -> Problem:
    L, M = 2, 2
    return Problem(
        name="allreduce-toy", batch_size=256, throughput_limit=256 / 0.025, num_samples=1e7,
        oct_s=np.array([[0.04, 0.01], [0.04, 0.01]]), odt_s=np.zeros((L, M)),
        alpha=np.full((L, M), 0.99), odt_parallel=True, boundary_bytes=np.array([1e4, 0.0]),
        network_bytes_per_s=np.array([1.25e9, 1.25e9]), latency_s=5e-5,
        price_per_hour=np.array([1.0, 5.0]), available=(None, None),
        type_names=("cheap-slow", "fast"), layer_names=("l0", "l1"),
        param_bytes=np.array([5e8, 5e8]))


def _all_plans(problem: Problem) -> np.ndarray:
    return np.array(list(itertools.product(range(problem.num_types), repeat=problem.num_layers)))


def test_des_and_analytic_rank_the_toy_oppositely(toy):
    plans = _all_plans(toy)
    analytic = evaluate_assignments(toy, plans).cost_usd
    des = DesJudge(toy, effects=EFFECTS).scores(plans)
    assert plans[np.argmin(analytic)].tolist() == [0, 0]
    assert plans[np.argmin(des)].tolist() == [1, 1]
    assert des.min() < 1e200 and (des[plans[:, 0] == 0] >= 1e200).all()  # only [1, 1] meets TL


def test_judge_caches_and_its_plan_reproduces_the_verdict(toy):
    judge = DesJudge(toy, effects=EFFECTS, seeds=(0, 3))
    verdict = judge(np.array([1, 1]))
    runs = judge.simulations
    assert judge(np.array([1, 1])) is verdict and judge.simulations == runs  # cached
    plan = judge.judged_plan(np.array([1, 1]))
    assert [s.num_replicas for s in plan.stages] == list(verdict.replicas)
    again = simulate(toy, plan, seed=0, options=DesOptions(effects=EFFECTS, num_steps=6),
                     record_spans=False).result
    assert again.cost_usd == pytest.approx(verdict.cost)
    assert assignment_of(toy, plan).tolist() == [1, 1]


def test_des_rewards_rank_judged_plans_by_the_simulator(toy):
    plans = _all_plans(toy)
    analytic = evaluate_assignments(toy, plans).cost_usd
    reward, judged = des_rewards(DesJudge(toy, effects=EFFECTS), plans, analytic, 1.0, top=4)
    assert judged.all()
    assert int(np.argmax(reward)) == 3  # [1, 1]: the DES optimum, not the analytic one


@pytest.mark.parametrize("checkpoint", ["shipped", "none"])
def test_rl_with_the_des_reward_returns_the_des_optimum(toy, checkpoint):
    judge = DesJudge(toy, effects=EFFECTS)
    plans = _all_plans(toy)
    oracle = plans[int(np.argmin(judge.scores(plans)))]
    scheduler = make_scheduler("rl", reward="des", effects=EFFECTS, updates=2,
                               checkpoint=checkpoint, decode_samples=8, batch=8)
    outcome = run_scheduler(scheduler, toy, "least")
    assert outcome.plan is not None and outcome.result.feasible
    assert assignment_of(toy, outcome.plan).tolist() == oracle.tolist()
    assert outcome.notes["des_feasible"] and outcome.notes["des_simulations"] > 0
    plain = run_scheduler(make_scheduler("rl", updates=2, decode_samples=8, batch=8), toy)
    assert assignment_of(toy, plain.plan).tolist() == [0, 0]  # the analytic optimum


def test_bad_des_options_are_rejected():
    with pytest.raises(ValueError, match="unknown effect"):
        make_scheduler("rl", reward="des", effects="gremlins")
    with pytest.raises(ValueError):
        make_scheduler("rl", reward="simulated")
    with pytest.raises(ValueError, match="des_seeds"):
        Args(reward="des", des_seeds="a,b")


def test_cli_schedule_and_train_rl_with_the_des_reward(toy, tmp_path, capsys):
    problem = tmp_path / "toy.json"
    problem.write_text(json.dumps(toy.to_json_dict()))
    code = main(["schedule", str(problem), "--scheduler", "rl", "--set", "reward=des",
                 "--set", f"effects={EFFECTS}", "--set", "updates=1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["notes"]["reward"] == "des"
    assert [s["resource"] for s in out["plan"]["stages"]] == ["fast"]
    ckpt = tmp_path / "tuned.pt"
    code = main(["train-rl", "--scheduler", "rl", str(problem), "--init", "shipped",
                 "--ppo-updates", "4", "--ppo-seconds", "60", "--batch", "32",
                 "--reward", "des", "--effects", EFFECTS, "--out", str(ckpt)])
    assert code == 0 and ckpt.exists() and ckpt.with_suffix(".csv").exists()
    assert "(DES)" in capsys.readouterr().out
    assert main(["train-rl", "--scheduler", "nope"]) == 2
