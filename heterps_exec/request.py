"""What `heterps-exec run` is asked to do: a `RunRequest` that checks itself as it is built.

    req = RunRequest(plan="plan.json", scenario="scenarios/exec-tiny.yaml", steps=0)
    # ExecError: --steps: expected 1..10,000,000, got 0

Every bad value is a one-line `ExecError` naming the flag (the CLI prints it, exit 2), raised
before anything is loaded or started. The H-PS fields (share, slow_replicas, overlap,
quantize) are the simulator's own (heterps_sim.core.hps.HpsOptions). What needs the plan or
the files is launch.prepare's to check. No torch at import.
"""

from __future__ import annotations

from pydantic import Field, ValidationError, field_validator, model_validator

from heterps_sim.core.files import UserFileError
from heterps_sim.core.hps import HpsOptions
from heterps_sim.core.limits import MAX_SEED, MAX_SLOWDOWN

MAX_STEPS = 10_000_000
"""Training steps of one run; more is surely a typo (and would outlive any timeout)."""
MAX_PS_SHARDS = 16

BOUNDS = {
    "steps": (lambda v: 1 <= v <= MAX_STEPS, f"1..{MAX_STEPS:,}"),
    "seed": (lambda v: 0 <= v <= MAX_SEED, f"an integer in 0..{MAX_SEED:,}"),
    "checkpoint_every": (lambda v: 0 <= v <= MAX_STEPS, f"0..{MAX_STEPS:,} (0: none)"),
    "table_scale": (lambda v: 0 < v <= 1, "a share in (0, 1]"),
    "lr": (lambda v: v > 0, "a finite rate > 0"),
    "ps_shards": (lambda v: 0 <= v <= MAX_PS_SHARDS, f"0..{MAX_PS_SHARDS}"),
    "ps_hot_fraction": (lambda v: 0 <= v <= 1, "a share in [0, 1]"),
}
"""Each bounded number: (accepts, what it accepts). Every bound says it one way,
"--flag: expected WHAT IT ACCEPTS, got VALUE" (NaN and infinity included)."""


class ExecError(UserFileError):
    """Bad plan / scenario / binding / options: one line, exit 2."""


FLAGS = {"plan": "PLAN.json", "out_dir": "--out", "data_dir": "--data",
         "timeout_s": "--rank-timeout", "slow_replicas": "--slow-replica",
         "fault": "--inject-fault"}
"""`heterps-exec run`'s flag for each RunRequest field not spelled --field-name."""


class RunRequest(HpsOptions):
    """What `heterps-exec run` is asked to do; it checks itself as it is built.

    A bad value raises a one-line ExecError naming the flag, what it accepts and what it got
    ("--steps: expected 1..10,000,000, got 0"), so nothing starts. The H-PS fields (share, slow_replicas, overlap, quantize) are the
    simulator's (heterps_sim.core.hps); the engine's quantize also takes auto[:BOUND]. What
    needs the plan or the files (which replicas exist, the fault's rank, the checkpoint's
    step) is checked by `prepare`.
    """

    plan: str
    """PLAN.json to run."""
    scenario: str
    """Scenario YAML naming a zoo model (the plan's layers)."""
    binding: str = "cpu"
    """Resource type -> device YAML, or "cpu" (everything on the CPU)."""
    steps: int = 20
    """Training steps (>= 1)."""
    seed: int = 0
    """Seed of the model's initial weights and of a generated dataset."""
    out_dir: str = ""
    """Run folder ("": runs/exec-<time>)."""
    data_dir: str = ""
    """An existing dataset folder ("": generate one in the run folder)."""
    num_samples: int = 0
    """Dataset size when one is generated (0: 20 global batches' worth, at least 4096)."""
    table_scale: float = 1.0
    """Multiplies every embedding table's rows, in (0, 1]."""
    optimizer: str = "sgd"
    """sgd or adagrad."""
    lr: float = 0.05
    """Learning rate (> 0)."""
    warmup_steps: int = 1
    """Steps left out of the measured throughput (at most steps - 1 are)."""
    timeout_s: float = 120.0
    """A rank waiting longer than this on a peer fails the run."""
    checkpoint_dir: str = ""
    """Resume from and write checkpoints to this folder ("": none)."""
    checkpoint_every: int = 0
    """Steps between checkpoints (0: none; needs checkpoint_dir)."""
    save_state: bool = False
    """Write the whole model's state dict (state.pt) at the end."""
    trace: bool = False
    """Record trace spans."""
    quantize: str = "none"
    """Boundary activations and gradients on the wire: none, fp16, bf16, int8, or auto[:BOUND]
    (per link and step the narrowest encoding whose relative error stays within BOUND,
    heterps_exec/hps/quantize.py)."""
    ps_shards: int = 0
    """Parameter-server ranks serving the embedding tables, 0..16 (0: local tables)."""
    ps_policy: str = "lfu"
    """PS hot-tier policy (heterps_exec.ps.spec.POLICIES)."""
    ps_hot_fraction: float = 0.05
    """PS hot-tier rows as a share of each table, in [0, 1]."""
    fault: dict = Field(default_factory=dict)
    """Testing: {"rank": r, "step": s, "mode": "kill" | "hang"} (RunSpec.fault)."""
    capacity_check: bool = True
    """Refuse a run whose ranks would not fit this machine's memory and cores before any rank
    starts (heterps_exec.launch.capacity); False runs it anyway (--no-capacity-check)."""

    def __init__(self, **fields) -> None:
        try:
            super().__init__(**fields)
        except ValidationError as exc:
            raise ExecError(_request_error(exc)) from None

    @field_validator(*BOUNDS)
    @classmethod
    def _in_range(cls, value, info):
        ok, what = BOUNDS[info.field_name]
        if not ok(value):
            raise ValueError(f"expected {what}, got {value}")
        return value

    @field_validator("slow_replicas")
    @classmethod
    def _slowdown_bounded(cls, value):
        for g, r, f in value:
            if not 1 <= f <= MAX_SLOWDOWN:
                raise ValueError(f"{g}:{r}:{f:g}: the factor must be in [1, {MAX_SLOWDOWN:g}]")
        return value

    @field_validator("quantize")
    @classmethod
    def _known_quantize(cls, value):
        from heterps_exec.hps.quantize import parse_choice
        parse_choice(value)  # raises ValueError naming what it accepts
        return value

    @field_validator("ps_policy")
    @classmethod
    def _policy(cls, value):
        from heterps_exec.ps.spec import POLICIES
        if value not in POLICIES:
            raise ValueError(f"expected one of {', '.join(POLICIES)}, got {value!r}")
        return value

    @model_validator(mode="after")
    def _checkpoints_need_a_folder(self) -> RunRequest:
        if self.checkpoint_every and not self.checkpoint_dir:
            raise ValueError("--checkpoint-every needs --checkpoint-dir")
        return self


def _request_error(exc: ValidationError) -> str:
    """The first problem of a RunRequest as one line naming the flag."""
    problem = exc.errors()[0]
    cause = problem.get("ctx", {}).get("error")
    message = str(cause) if isinstance(cause, ValueError) else problem["msg"]
    if not problem["loc"]:  # a rule over several fields names its flags itself
        return message
    name = str(problem["loc"][0])
    if problem["type"] == "finite_number" and name in BOUNDS:  # NaN or infinity
        message = f"expected {BOUNDS[name][1]}, got {problem['input']}"
    return f"{FLAGS.get(name, '--' + name.replace('_', '-'))}: {message}"
