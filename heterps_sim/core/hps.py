"""The H-PS options the simulator and the engine share: one `HpsOptions`, one flag parser.

    share          equal: replica r of a k-replica stage runs microbatches mu with mu mod k == r
                   speed: from the second step on, in proportion to each replica's speed
    slow_replicas  ((stage, replica, factor), ...): units slower by a known factor
    overlap        the gradient all-reduce runs during the step's last backward
    quantize       boundary activations and gradients on the wire: none | fp16 | bf16 | int8

`heterps_sim.des.DesOptions` and `heterps_exec.request.RunRequest` both inherit these fields,
so `--share speed --slow-replica 1:0:2` means the same thing to `heterps-sim evaluate --engine
des` and to `heterps-exec run`. The engine widens `quantize` with its `auto[:BOUND]` rule
(heterps_exec/hps/quantize.py); the simulator models fixed encodings only.

    >>> parse_slow_replica("1:0:2.5")
    (1, 0, 2.5)

numpy + pydantic only (never simpy or torch): both packages import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, field_validator

from heterps_sim.core.limits import MAX_SLOWDOWN

Encoding = Literal["none", "fp16", "bf16", "int8"]
ENCODINGS: tuple[str, ...] = get_args(Encoding)
"""Wire encodings of boundary tensors, narrowest last (fp16/bf16: half the bytes, int8: a
quarter plus a scale per row)."""
Share = Literal["equal", "speed"]
SHARES: tuple[str, ...] = get_args(Share)
"""How a stage's replicas split a step's microbatches."""


def parse_slow_replica(text: str) -> tuple[int, int, float]:
    """`--slow-replica` text "STAGE:REPLICA:FACTOR" -> (stage, replica, factor).

    Only the form is checked here; whether the plan has that replica and the factor is >= 1
    is `HpsOptions.missing_replica`'s question (it needs the plan).
    """
    parts = text.split(":")
    try:
        if len(parts) != 3:
            raise ValueError
        return int(parts[0]), int(parts[1]), float(parts[2])
    except ValueError:
        raise ValueError(f"expected STAGE:REPLICA:FACTOR, got {text!r}") from None


class HpsOptions(BaseModel):
    """The H-PS features a run switches on; every one is off by default."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True,
                              allow_inf_nan=False)

    share: Share = "equal"
    """How a stage's replicas split a step's microbatches: equal (mu mod k) or speed (in
    proportion to each replica's measured speed from the second step on,
    heterps_sim.core.sharing; flush schedules only). The flag --share."""
    slow_replicas: tuple[tuple[int, int, float], ...] = ()
    """(stage, replica, factor): units slower by a known factor (the engine dilates that
    replica's compute; the simulator's stragglers effect draws such units at random instead).
    The flag --slow-replica STAGE:REPLICA:F, repeatable."""
    overlap: bool = False
    """A stage's gradient all-reduce runs during the step's last backward, so only what is
    left of it is exposed. The flag --overlap on|off."""
    quantize: Encoding = "none"
    """Boundary activations and gradients on the wire: none, fp16 or bf16 (half the bytes),
    int8 (a quarter). The flag --quantize."""

    @field_validator("slow_replicas")
    @classmethod
    def _slowdown_bounded(cls, v):
        """A factor past MAX_SLOWDOWN is no unit (1e300 overflowed the engine's sleep and kept
        the simulator busy for ever); whether the replica exists needs the plan
        (missing_replica)."""
        for g, r, f in v:
            if not f <= MAX_SLOWDOWN:
                raise ValueError(f"--slow-replica {g}:{r}:{f:g}: the factor must be at most "
                                 f"{MAX_SLOWDOWN:g}")
        return v

    @field_validator("share", mode="before")
    @classmethod
    def _known_share(cls, v):
        if v not in SHARES:
            raise ValueError(f"expected equal or speed, got {v!r}")
        return v

    def missing_replica(self, replicas: Sequence[int | None]) -> tuple[int, int, float] | None:
        """The first slow replica a plan with these per-stage replica counts does not have
        (stage and replica count from 0; None: the stage's count is not known yet, any
        replica index >= 0 passes), or whose factor is below 1; None when all are fine."""
        for g, r, f in self.slow_replicas:
            k = replicas[g] if 0 <= g < len(replicas) else 0
            if not (0 <= g < len(replicas) and 0 <= r and (k is None or r < k) and f >= 1):
                return g, r, f
        return None
