"""The Gymnasium environment: the public checker, registration, determinism, masking, rewards,
and a stock algorithm (stable-baselines3 PPO) driving it."""

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from heterps_sim.core.plan import plan_from_assignment
from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.schedulers.rl.paper.env import ENV_ID, ScheduleEnv
from heterps_sim.schedulers.rl.reward import worst_reward
from heterps_sim.testing import random_problem


def tiny(seed: int = 0, **kw):
    return random_problem(np.random.default_rng(seed), 4, 3, **kw)


def rollout(env, seed: int):
    """(observations, rewards, final info) of one episode of masked random actions."""
    obs, info = env.reset(seed=seed)
    env.action_space.seed(seed)
    seen, rewards, done = [obs], [], False
    while not done:
        action = env.action_space.sample(mask=info["action_mask"].astype(np.int8))
        obs, reward, terminated, truncated, info = env.step(action)
        seen.append(obs)
        rewards.append(reward)
        done = terminated or truncated
    return seen, rewards, info


def test_make_with_no_arguments_passes_the_checker():
    env = gym.make(ENV_ID)
    assert env.unwrapped.problem.num_layers > 0
    check_env(env.unwrapped)


@pytest.mark.parametrize("invalid_action", ["terminate", "remap"])
def test_checker_on_a_problem_with_masked_types(invalid_action):
    p = random_problem(np.random.default_rng(3), 5, 4, caps=True, unrunnable=0.3)
    check_env(gym.make(ENV_ID, problem=p, invalid_action=invalid_action).unwrapped)


def test_make_by_module_string_needs_no_import():
    code = ("import gymnasium as gym; "
            "env = gym.make('heterps_sim.schedulers.rl.paper.env:heterps/Schedule-v0'); "
            "print(env.unwrapped.problem.num_layers)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout.split()[-1]) > 0


def test_same_seed_same_rollout():
    p = random_problem(np.random.default_rng(5), 6, 4, unrunnable=0.3)
    a, b, c = (rollout(ScheduleEnv(p), seed) for seed in (7, 7, 8))
    assert a[1] == b[1] and all(
        np.array_equal(x[k], y[k]) for x, y in zip(a[0], b[0]) for k in x)
    assert not all(np.array_equal(x["choices"], y["choices"]) for x, y in zip(a[0], c[0]))


def test_final_reward_matches_the_reference_cost_model():
    p = tiny(2, unrunnable=0.0, limit_quantile=0.5)
    env = ScheduleEnv(p)
    _, rewards, info = rollout(env, 0)
    assert rewards[:-1] == [0.0] * (p.num_layers - 1)
    plan = plan_from_assignment(p.layer_names, p.type_names, info["assignment"])
    ref = evaluate_plan(p, plan, "least")
    assert info["feasible"] == ref.feasible
    if ref.feasible:
        assert info["cost_usd"] == pytest.approx(ref.cost_usd, rel=1e-9)
        assert rewards[-1] == pytest.approx(-np.log(ref.cost_usd / env.reference))
    else:
        assert rewards[-1] < -np.log(1e6)


def test_invalid_action_terminates_or_is_remapped():
    p = tiny(1)
    p.oct_s[0, 0] = np.nan  # layer 0 cannot run on type 0
    p.alpha[0, 0] = np.nan
    env = ScheduleEnv(p)
    _, info = env.reset(seed=0)
    assert not info["action_mask"][0] and not env.action_masks()[0]
    _, reward, terminated, _, info = env.step(0)
    assert terminated and info["invalid_action"] and reward < worst_reward()
    env = ScheduleEnv(p, invalid_action="remap")
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step(0)
    assert not terminated and info["remapped"] and obs["choices"][0] != 0
    assert obs["prev_action"] == obs["choices"][0]


def test_stock_ppo_drives_the_env_and_predicts_a_valid_plan(tmp_path):
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import configure

    p = tiny(4, unrunnable=0.0, limit_quantile=0.5)
    env = ScheduleEnv(p)
    model = PPO("MultiInputPolicy", env, n_steps=64, batch_size=32, n_epochs=2, seed=0,
                device="cpu")
    model.set_logger(configure(str(tmp_path), []))  # no SB3-<date> folder left in /tmp
    model.learn(total_timesteps=256)
    obs, info = env.reset(seed=0)
    done, steps = False, 0
    while not done:
        action, _ = model.predict(obs, deterministic=True)
        assert info["action_mask"][int(action)]
        obs, reward, done, _, info = env.step(int(action))
        steps += 1
    assert steps == p.num_layers and "invalid_action" not in info
    plan = plan_from_assignment(p.layer_names, p.type_names, info["assignment"])
    assert plan.problems(p.layer_names, p.type_names) == []
