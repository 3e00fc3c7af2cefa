"""What every rank needs to know before it starts: the run spec and who runs what.

The launcher writes one `RunSpec` (JSON) that all ranks read. Ranks are numbered stage by
stage: stage 0's replicas first, then stage 1's, ... (`Layout`). Microbatch mu (numbered
globally, mu = step * m + i) runs at stage g on replica mu mod k_g and in the order of
heterps_sim.core.lanes (the simulator's order, so predicted and measured timelines line up).
No torch.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from heterps_sim.core import lanes
from heterps_sim.core.plan import Plan, plan_from_dict


@dataclass(frozen=True, slots=True, kw_only=True)
class StageBinding:
    """Where one stage's replicas run."""

    device: str = "cpu"
    """"cpu" or "cuda:N"."""
    slowdown: float = 1.0
    """Compute time is dilated by this factor (>= 1) to emulate a slower resource type."""
    emulated: bool = False
    replica_slowdowns: tuple[float, ...] = ()
    """Mixed stage: each replica's own dilation (its type's), replacing `slowdown`; () when
    every replica of the stage is of one type."""

    def slowdown_of(self, replica: int) -> float:
        return self.replica_slowdowns[replica] if self.replica_slowdowns else self.slowdown


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSpec:
    """Everything a rank reads at start (written by launch.py as JSON)."""

    plan: dict
    model: str
    model_params: dict = field(default_factory=dict)
    model_layers: list = field(default_factory=list)
    """A model written as layers in the scenario (heterps_sim.inputs.yaml_model), as plain
    dicts; [] for a zoo model."""
    user_model: dict = field(default_factory=dict)
    """A user's PyTorch module (heterps_exec.model.user_model.run_entry); {} otherwise."""
    table_scale: float = 1.0
    data_dir: str
    data: dict = field(default_factory=dict)
    """The resolved `data:` section (heterps_exec.data.prepare); {}: the synthetic dataset in
    data_dir."""
    batch_size: int
    steps: int
    seed: int = 0
    optimizer: str = "sgd"
    lr: float = 0.05
    bindings: list[StageBinding] = field(default_factory=list)
    out_dir: str
    """Rank 0 writes result.json (and state.pt, trace spans) here."""
    threads_per_rank: int = 1
    timeout_s: float = 120.0
    """A rank waiting longer than this on a peer fails the run instead of hanging."""
    warmup_steps: int = 1
    """Steps left out of the measured throughput (first-touch allocation, thread start-up)."""
    checkpoint_dir: str = ""
    checkpoint_every: int = 0
    save_state: bool = False
    trace: bool = False
    # The H-PS options (heterps_sim.core.hps.HpsOptions), copied from the checked RunRequest:
    overlap: bool = False
    """All-reduce a stage's gradient buckets during its last backward of the step."""
    share: str = "equal"
    """How a stage's replicas split a step's microbatches: "equal" (mu mod k) or "speed"
    (in proportion to measured speed, hps/speed.py)."""
    slow_replicas: list = field(default_factory=list)
    """[[stage, replica, factor], ...]: emulated slow units (compute dilated by factor)."""
    quantize: str = "none"
    """Boundary activations and gradients on the wire: none, fp16, bf16, int8, or
    auto[:BOUND] (hps/quantize.py)."""
    ps_shards: int = 0
    """Parameter-server ranks serving the embedding tables (0: local tables)."""
    ps_policy: str = "lfu"
    ps_hot_fraction: float = 0.05
    fault: dict = field(default_factory=dict)
    """Testing aid: {"rank": r, "step": s, "mode": "kill" | "hang"} kills (or hangs) rank r at
    the start of step s on the first attempt only (torchrun then restarts everyone from the
    last checkpoint; a hung rank makes its peers time out)."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"

    @staticmethod
    def load(path: str | Path) -> RunSpec:
        data = json.loads(Path(path).read_text())
        data["bindings"] = [StageBinding(**{**b, "replica_slowdowns": tuple(
            b.get("replica_slowdowns", ()))}) for b in data["bindings"]]
        return RunSpec(**data)

    def plan_obj(self) -> Plan:
        return plan_from_dict(self.plan)

    def layout(self) -> Layout:
        return Layout(tuple(s.num_replicas for s in self.plan_obj().stages))


@dataclass(frozen=True, slots=True)
class Layout:
    """Rank numbering and microbatch routing for a plan's replica counts."""

    replicas: tuple[int, ...]

    @property
    def world_size(self) -> int:
        return sum(self.replicas)

    @property
    def num_stages(self) -> int:
        return len(self.replicas)

    def first_rank(self, stage: int) -> int:
        return sum(self.replicas[:stage])

    def ranks(self, stage: int) -> list[int]:
        lo = self.first_rank(stage)
        return list(range(lo, lo + self.replicas[stage]))

    def role(self, rank: int) -> tuple[int, int]:
        """(stage, replica) of a rank."""
        for g, k in enumerate(self.replicas):
            if rank < k:
                return g, rank
            rank -= k
        raise ValueError("rank outside the world")

    def rank_of(self, stage: int, mu: int) -> int:
        """The rank that runs microbatch mu at `stage`."""
        return self.first_rank(stage) + mu % self.replicas[stage]

    def actions(self, schedule: str, stage: int, replica: int, m: int,
                num_steps: int, *, first_step: int = 0) -> list[tuple[int, int]]:
        """This replica's (code, mu) list over all steps: lanes.F, lanes.B, (lanes.STEP, n).

        gpipe and 1f1b flush every step; async is one continuous 1F1B stream from
        `first_step` over `num_steps` steps (the engine runs one per checkpoint segment)."""
        flush = schedule != "async"
        num_lanes = lanes.num_lanes(list(self.replicas), flush=flush)
        base = lanes.stage_orders(schedule, flush, stage, self.num_stages, m, num_steps,
                                  num_lanes)
        if flush:
            return lanes.replica_actions(base, True, self.replicas[stage], replica, m,
                                         num_steps, num_lanes)
        return lanes.replica_actions(base, False, self.replicas[stage], replica, m, num_steps,
                                     num_lanes, first_step=first_step)


def microbatch_bounds(batch_size: int, m: int) -> list[tuple[int, int]]:
    """[lo, hi) of each microbatch in a global batch (sizes differ by at most one)."""
    base, extra = divmod(batch_size, m)
    bounds, lo = [], 0
    for i in range(m):
        hi = lo + base + (1 if i < extra else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds
