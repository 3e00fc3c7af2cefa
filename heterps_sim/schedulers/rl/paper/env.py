"""The scheduling problem as a Gymnasium environment: one step per layer. numpy only (no torch).

    env = gymnasium.make("heterps/Schedule-v0")          # after importing this module
    env = gymnasium.make("heterps_sim.schedulers.rl.paper.env:heterps/Schedule-v0")   # no import
    env = ScheduleEnv(problem, mode="least", invalid_action="terminate", reward_scale="log")

An episode assigns a resource type to layer 0, 1, ..., L-1 in order (stages = maximal runs of
one type, the paper's plans). Spaces, for a problem of L layers and M types:

    action        Discrete(M): the type of the current layer
    observation   Dict:
      "layer"        Box(-10, 10, (NUM_LAYER_FEATURES,))  the current layer's features
      "types"        Box(-10, 10, (M, NUM_TYPE_FEATURES + NUM_DYNAMIC_FEATURES)) per type: the
                     static (layer, type) features then "is the previous layer's type" and the
                     boundary time a switch to this type would add (schedulers/rl/paper/features.py)
      "prev_action"  Discrete(M + 1): the previous layer's type, M before the first layer
      "choices"      MultiDiscrete([M + 1] * L): the types chosen so far, M = not yet chosen
      "action_mask"  MultiBinary(M): the types allowed for the current layer
    (after the last step the observation shows the last layer again with every choice made)

Masking: `action_masks()` (the sb3-contrib MaskablePPO convention) and info["action_mask"]
give the allowed types (runnable and with units available). An action outside the mask:
with invalid_action="terminate" (default) the episode ends at once with reward
worst_reward() - 1 (below any complete plan's); with "remap" it is replaced by the lowest
allowed type index (info["remapped"] = True) and the episode goes on (a layer with no
allowed type at all ends the episode either way).

Reward: 0 until the last layer, then reward.rewards(): -ln(cost / reference) for a feasible
plan (reward_scale="log", default) or the paper's -(cost / reference) (reward_scale="linear"),
and below every feasible plan's reward when infeasible: r(RATIO_CAP) - 1 - shortfall, the
shortfall graded by how close the stages come to TL at any unit count (reference = the cheapest homogeneous plan, or a lower bound on cost when none is feasible).
The final info holds cost_usd, throughput, feasible, assignment, reference_cost.
The environment is deterministic: reset(seed=) only seeds self.np_random (and the spaces).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from heterps_sim.core.problem import Problem
from heterps_sim.cost.batch import evaluate_assignments
from heterps_sim.schedulers.rl.paper.features import (
    CLIP,
    NUM_DYNAMIC_FEATURES,
    NUM_LAYER_FEATURES,
    NUM_TYPE_FEATURES,
    dynamic_features,
    encode,
)
from heterps_sim.schedulers.rl.reward import SCALES, reference_cost, rewards, worst_reward

ENV_ID = "heterps/Schedule-v0"


class ScheduleEnv(gym.Env):
    """Assign a resource type per layer; the provisioned plan's cost is the reward."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, problem: Problem | None = None, mode: str = "least",
                 invalid_action: str = "terminate", reward_scale: str = "log",
                 render_mode: str | None = None):
        if problem is None:
            from heterps_sim.inputs.load import load_input
            problem = load_input(None).problem
        if mode not in ("least", "exact"):
            raise ValueError(f"mode must be 'least' or 'exact', got {mode!r}")
        if invalid_action not in ("terminate", "remap"):
            raise ValueError(f"invalid_action must be 'terminate' or 'remap', got {invalid_action!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if reward_scale not in SCALES:
            raise ValueError(f"reward_scale must be one of {SCALES}, got {reward_scale!r}")
        self.problem, self.mode, self.invalid_action = problem, mode, invalid_action
        self.reward_scale = reward_scale
        self.render_mode = render_mode
        self.enc = encode(problem)
        self.reference, self.reference_kind = reference_cost(problem, mode)
        num_l, num_m = problem.num_layers, problem.num_types
        self.action_space = spaces.Discrete(num_m)
        self.observation_space = spaces.Dict({
            "layer": spaces.Box(-CLIP, CLIP, (NUM_LAYER_FEATURES,), np.float32),
            "types": spaces.Box(-CLIP, CLIP, (num_m, NUM_TYPE_FEATURES + NUM_DYNAMIC_FEATURES),
                                np.float32),
            "prev_action": spaces.Discrete(num_m + 1),
            "choices": spaces.MultiDiscrete(np.full(num_l, num_m + 1)),
            "action_mask": spaces.MultiBinary(num_m),
        })
        self._choices = np.full(num_l, num_m, np.int64)
        self._t = 0

    # -- Gymnasium API --------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._choices[:] = self.problem.num_types
        self._t = 0
        return self._obs(), self._info()

    def step(self, action):
        if self._t >= self.problem.num_layers:
            raise RuntimeError("step() after the episode ended: call reset()")
        if not self.action_space.contains(action):
            raise ValueError(f"action must be a type index in [0, {self.problem.num_types}), "
                             f"got {action!r}")
        action, info = int(action), {}
        allowed = self.enc.mask[self._t]
        if not allowed[action]:
            if self.invalid_action == "terminate" or not allowed.any():
                info.update(invalid_action=True, layer=self.problem.layer_names[self._t])
                self._t = self.problem.num_layers
                reward = worst_reward(self.reward_scale) - 1.0
                return self._obs(), reward, True, False, {**self._info(), **info}
            action = int(np.flatnonzero(allowed)[0])
            info["remapped"] = True
        self._choices[self._t] = action
        self._t += 1
        if self._t < self.problem.num_layers:
            return self._obs(), 0.0, False, False, {**self._info(), **info}
        plans = self._choices[None, :]
        result = evaluate_assignments(self.problem, plans, self.mode)
        reward = float(rewards(self.problem, plans, result, self.reference,
                               self.reward_scale)[0])
        info.update(cost_usd=float(result.cost_usd[0]), throughput=float(result.throughput[0]),
                    feasible=bool(result.feasible[0]), assignment=self._choices.copy(),
                    reference_cost=self.reference)
        return self._obs(), reward, True, False, {**self._info(), **info}

    def action_masks(self) -> np.ndarray:
        """Bool (M,): the types allowed for the current layer (all False once done)."""
        if self._t >= self.problem.num_layers:
            return np.zeros(self.problem.num_types, bool)
        return self.enc.mask[self._t].copy()

    def render(self):
        if self.render_mode != "ansi":
            return None
        names = [self.problem.type_names[c] if c < self.problem.num_types else "?"
                 for c in self._choices]
        return " | ".join(f"{layer}:{t}" for layer, t in zip(self.problem.layer_names, names))

    # -- helpers --------------------------------------------------------------------------
    def _obs(self) -> dict:
        num_l, num_m = self.problem.num_layers, self.problem.num_types
        t = min(self._t, num_l - 1)
        prev = int(self._choices[t - 1]) if t > 0 and self._choices[t - 1] < num_m else None
        types = np.concatenate([self.enc.types[t], dynamic_features(self.enc, t, prev)], axis=1)
        return {
            "layer": self.enc.layer[t].copy(),
            "types": types.astype(np.float32),
            "prev_action": num_m if prev is None else prev,
            "choices": self._choices.copy(),
            "action_mask": self.action_masks().astype(np.int8),
        }

    def _info(self) -> dict:
        return {"action_mask": self.action_masks(), "layer_index": self._t}


def register_envs() -> None:
    """Register ENV_ID with Gymnasium (idempotent). Gymnasium 1.x has no plug-in entry
    points, so this runs at import of this module; `gymnasium.make(ENV_ID)` then works."""
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point="heterps_sim.schedulers.rl.paper.env:ScheduleEnv")


register_envs()
