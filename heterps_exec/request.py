"""What a run is asked to do: `RunRequest`, the one options object of `heterps-exec run` and
`run_plan`, which checks itself as it is built.

    req = RunRequest(plan="plan.json", scenario="scenarios/exec-tiny.yaml", steps=0)
    # ExecError: --steps: expected 1..10,000,000, got 0

Every option lives here once: its field (type, default, the docstring under it), its bound
and its flag. `heterps-exec run`'s flags are generated from these fields (cli/run.py), so the
command line and `run_plan(RunRequest(...))` cannot drift apart. Every bad value is a
one-line `ExecError` naming the flag (the CLI prints it, exit 2), raised before anything is
loaded or started. The H-PS fields (share, slow_replicas, overlap, quantize) are the
simulator's own (heterps_sim.core.hps.HpsOptions). What needs the plan or the files is
launch.prepare's to check; what needs this machine (its addresses, writable outputs) is
run_plan's. No torch at import.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from heterps_sim.core.files import UserFileError
from heterps_sim.core.hps import HpsOptions, parse_slow_replica
from heterps_sim.core.limits import MAX_SEED, MAX_SLOWDOWN

MAX_STEPS = 10_000_000
"""Training steps of one run; more is surely a typo (and would outlive any timeout)."""
MAX_PS_SHARDS = 16
MAX_NODES = 1024
MAX_RESTARTS = 100
MAX_SAMPLES = 1_000_000_000
"""Samples of a generated dataset (each is a row of every input in memory while written)."""
MAX_TIMEOUT_S = 30 * 24 * 3600.0
MIN_TIMEOUT_S = 1.0
"""Shortest timeout: a rank starts in seconds, so less than one times out every run."""
MIN_TABLE_SCALE = 1e-6
"""Smallest share of a table's rows built (1e-308 built tables of no rows and failed in the
ranks after the launch)."""
MAX_LR = 100.0
"""Largest learning rate (1e308 trained to NaN in the ranks after the launch)."""

BOUNDS = {
    "steps": (lambda v: 1 <= v <= MAX_STEPS, f"1..{MAX_STEPS:,}"),
    "seed": (lambda v: 0 <= v <= MAX_SEED, f"an integer in 0..{MAX_SEED:,}"),
    "num_samples": (lambda v: 0 <= v <= MAX_SAMPLES,
                    f"0..{MAX_SAMPLES:,} (0: the default size)"),
    "warmup_steps": (lambda v: v >= 0, ">= 0"),
    "checkpoint_every": (lambda v: 0 <= v <= MAX_STEPS, f"0..{MAX_STEPS:,} (0: none)"),
    "table_scale": (lambda v: MIN_TABLE_SCALE <= v <= 1, f"a share in [{MIN_TABLE_SCALE:g}, 1]"),
    "lr": (lambda v: 0 < v <= MAX_LR, f"a finite rate in (0, {MAX_LR:g}]"),
    "ps_shards": (lambda v: 0 <= v <= MAX_PS_SHARDS, f"0..{MAX_PS_SHARDS}"),
    "ps_hot_fraction": (lambda v: 0 <= v <= 1, "a share in [0, 1]"),
    "timeout_s": (lambda v: MIN_TIMEOUT_S <= v <= MAX_TIMEOUT_S,
                  f"seconds in [{MIN_TIMEOUT_S:g}, {MAX_TIMEOUT_S:g}]"),
    "run_timeout_s": (lambda v: MIN_TIMEOUT_S <= v <= MAX_TIMEOUT_S,
                      f"seconds in [{MIN_TIMEOUT_S:g}, {MAX_TIMEOUT_S:g}]"),
    "max_restarts": (lambda v: 0 <= v <= MAX_RESTARTS, f"0..{MAX_RESTARTS}"),
    "nnodes": (lambda v: 1 <= v <= MAX_NODES, f"1..{MAX_NODES}"),
}
"""Each bounded number: (accepts, what it accepts). Every bound says it one way,
"--flag: expected WHAT IT ACCEPTS, got VALUE" (NaN and infinity included)."""


class ExecError(UserFileError):
    """Bad plan / scenario / binding / options: one line, exit 2."""


FLAGS = {"plan": "PLAN.json", "out_dir": "--out", "data_dir": "--data",
         "timeout_s": "--rank-timeout", "run_timeout_s": "--timeout",
         "slow_replicas": "--slow-replica", "fault": "--inject-fault",
         "capacity_check": "--no-capacity-check"}
"""`heterps-exec run`'s flag for each RunRequest field not spelled --field-name."""


def flag_of(name: str) -> str:
    """The flag (or the positional's name) of a RunRequest field."""
    return FLAGS.get(name, "--" + name.replace("_", "-"))


class RunRequest(HpsOptions):
    """What `heterps-exec run` and `run_plan` are asked to do; it checks itself as it is built.

    A bad value raises a one-line ExecError naming the flag, what it accepts and what it got
    ("--steps: expected 1..10,000,000, got 0"), so nothing starts. The H-PS fields (share,
    slow_replicas, overlap, quantize) are the simulator's (heterps_sim.core.hps); the
    engine's quantize also takes auto[:BOUND]. Text fields take the command line's words
    ("1:0:2" for a slow replica, "3:5:hang" for a fault, "on"/"off" for a switch). What
    needs the plan or the files (which replicas exist, the fault's rank, the checkpoint's
    step) is checked by `prepare`.
    """

    plan: str | dict
    """The plan to run: a PLAN.json path, or a plan itself (a heterps Plan or its JSON dict;
    run_plan writes it to the run folder)."""
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
    optimizer: Literal["sgd", "adagrad"] = "sgd"
    """sgd or adagrad."""
    lr: float = 0.05
    """Learning rate (> 0)."""
    warmup_steps: int = 1
    """Steps left out of the measured throughput (at most steps - 1 are)."""
    timeout_s: float = 120.0
    """Seconds a rank may wait on a peer; longer fails the run."""
    run_timeout_s: float = 1800.0
    """Wall-clock seconds of the whole run (every attempt); longer stops every process."""
    checkpoint_dir: str = ""
    """Resume from and write checkpoints to this folder ("": none)."""
    checkpoint_every: int = 0
    """Steps between checkpoints (0: none; needs checkpoint_dir)."""
    max_restarts: int = 0
    """torchrun restarts every rank up to this many times after a failure (from the latest
    checkpoint, with checkpoint_dir)."""
    save_state: str = ""
    """Write the whole model's state dict to this file at the end ("": not written)."""
    trace: str = ""
    """Write a Chrome/Perfetto trace of the real spans to this file ("": none)."""
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
    nnodes: int = 1
    """Machines the run spans (each runs the same request with its own node_rank)."""
    node_rank: int = 0
    """This machine's number, 0..nnodes - 1 (node 0 reports the result)."""
    rdzv_endpoint: str = ""
    """Several machines: HOST:PORT of the rendezvous (on node 0)."""
    rdzv_id: str = "heterps"
    """Several machines: the rendezvous's name, the same on every node."""
    bind_addr: str = ""
    """Several machines: the address of this machine that the run listens on ("": the
    rdzv_endpoint host if it is this machine's)."""
    capacity_check: bool = True
    """Refuse a run whose ranks would not fit this machine's memory and cores before any rank
    starts (heterps_exec.launch.capacity); False runs it anyway (--no-capacity-check)."""
    fault: dict = Field(default_factory=dict)
    """Testing: kill (or hang) a rank at the start of a step, on the first attempt only:
    "RANK:STEP[:kill|hang]" or {"rank": r, "step": s, "mode": "kill" | "hang"}
    (RunSpec.fault)."""

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

    @field_validator("plan", mode="before")
    @classmethod
    def _plan_as_data(cls, value):
        return value.to_json_dict() if hasattr(value, "to_json_dict") else value

    @field_validator("slow_replicas", mode="before")
    @classmethod
    def _slow_replica_words(cls, value):
        if isinstance(value, (list, tuple)):
            return tuple(parse_slow_replica(x) if isinstance(x, str) else x for x in value)
        return value

    @field_validator("fault", mode="before")
    @classmethod
    def _fault_words(cls, value):
        return parse_fault(value) if isinstance(value, str) else value

    @field_validator("rdzv_endpoint")
    @classmethod
    def _host_port(cls, value):
        host, sep, port = value.rpartition(":")
        if value and not (sep and host and port.isdigit() and 0 < int(port) < 65536):
            raise ValueError(f"expected HOST:PORT, got {value!r}")
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

    @model_validator(mode="after")
    def _nodes(self) -> RunRequest:
        n = self.nnodes
        if not 0 <= self.node_rank < n:
            raise ValueError(f"--node-rank: expected 0..{n - 1} (--nnodes {n}), "
                             f"got {self.node_rank}")
        if n > 1 and not self.rdzv_endpoint:
            raise ValueError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT")
        if self.bind_addr and n == 1:
            raise ValueError("--bind-addr: only with --nnodes > 1 (one machine listens on "
                             "127.0.0.1)")
        return self


def parse_fault(text: str) -> dict:
    """--inject-fault's "RANK:STEP[:kill|hang]" -> {"rank", "step", "mode"} ("" -> {})."""
    if not text:
        return {}
    parts = text.split(":")
    try:
        if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("kill", "hang")):
            raise ValueError
        return {"rank": int(parts[0]), "step": int(parts[1]),
                "mode": parts[2] if len(parts) == 3 else "kill"}
    except ValueError:
        raise ValueError(f"expected RANK:STEP[:kill|hang], got {text!r}") from None


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
