"""The async schedule's weight versions: which weights each step's microbatches use.

An `async` pipeline never flushes: step t + 1's forwards start while step t's backwards still
drain, so a forward cannot wait for the update of the step just before. heterps fixes the
staleness per plan instead of letting timing decide it (PipeDream-2BW's rule, generalised):

    W(0)       the initial weights;  W(t + 1) = update(W(t), g_t)
    g_t        the gradient of step t's batch computed at W(max(0, t - D)), every stage alike

D = 1 is PipeDream-2BW's double buffering (one step behind); D = 0 is synchronous training
(a one-stage plan). The rule is the same for every stage, replica and layout, so a plan's result depends
on D alone, never on timing, and one single-process reference (heterps_exec.runtime.reference)
is the oracle of every layout and of a run resumed from a checkpoint. Backwards use the
weights their forwards used (weight stashing): a stage keeps the versions its in-flight steps
read, at most D + 1 copies of its weights besides the live ones.

`staleness(replicas, m)` is the least D with which the continuous 1F1B stream of
heterps_sim.core.lanes never waits for a version: at stage g (warm-up w_g = s - g - 1 rounds of
L microbatches) the forward of round rho follows every backward of rounds up to rho - w_g - 1
on every replica of the stage, and those depend on no forward of round rho or later, so
waiting for them cannot close a cycle. Step t's first forward is in round floor(t m / L) of
the stream; it needs the update of step t - D - 1, whose last backward is in round
floor(((t - D) m - 1) / L). No simpy, no torch.
"""

from __future__ import annotations

import math

from heterps_sim.core.lanes import num_lanes

MAX_STALENESS = 64
"""A plan needing more steps of staleness than this is refused (m far below the stages)."""


def staleness(replicas: list[int], m: int) -> int:
    """D: the least staleness in steps the async stream of this plan runs without waiting for
    a version (module docstring). 0 only where the stream already finishes a step's backwards
    before the next step's forwards (one stage): the run is then synchronous training."""
    if m < 1 or not replicas or min(replicas) < 1:
        raise ValueError("staleness needs m >= 1 and at least one replica per stage")
    lanes = num_lanes(list(replicas), flush=False)
    warmup = len(replicas) - 1  # stage 0's, the longest
    period = lanes // math.gcd(m, lanes)  # the rounds' pattern repeats every `period` steps
    for d in range(MAX_STALENESS + 1):
        if all((t - d) * m - 1 < 0 or
               ((t - d) * m - 1) // lanes <= (t * m) // lanes - warmup - 1
               for t in range(d + 1, d + 2 + 2 * period)):
            return d
    raise ValueError(f"an async pipeline of {len(replicas)} stages with m = {m} would need "
                     f"more than {MAX_STALENESS} steps of staleness; use more microbatches")


def synchronous(replicas: list[int], m: int) -> bool:
    """The async stream of this plan trains synchronously: staleness 0 (one stage with at
    least as many microbatches as units), so every step waits for the update before it and
    the run is the flushed plan's. False where the plan needs more staleness than allowed."""
    try:
        return staleness(replicas, m) == 0
    except ValueError:
        return False


def version_of(step: int, d: int) -> int:
    """The weights version (updates applied) step `step`'s microbatches use."""
    return max(0, step - d)
