"""The microbatch order of one pipeline stage: shared by the simulator and the real engine.

`stage_actions(schedule, stage, num_stages, num_microbatches)` lists what stage `stage` does in
one training step, as (action, microbatch) pairs with action "F" (forward) or "B" (backward):

    gpipe  all forwards, then all backwards, both in microbatch order (torch's ScheduleGPipe).
           stage 0 of 3, m = 4:  F0 F1 F2 F3 B0 B1 B2 B3
    1f1b   (num_stages - stage - 1) warm-up forwards, then one forward / one backward in turn,
           then the remaining backwards (PipeDream-flush / Megatron / torch's Schedule1F1B).
           stage 0 of 3, m = 4:  F0 F1 F2 B0 F3 B1 B2 B3
           stage 2 of 3, m = 4:  F0 B0 F1 B1 F2 B2 F3 B3
    async  the 1f1b order within a step, but steps are not separated by a flush: the next step's
           forwards may start while this step's backwards drain (PipeDream-style; weights update
           per replica without waiting for the pipeline to empty).

With s equal stages taking tf and tb per microbatch, both gpipe and 1f1b finish a step in
(m + s - 1)(tf + tb); 1f1b keeps at most s - stage microbatches' activations alive, gpipe m.
No simpy, no torch.
"""

from __future__ import annotations

from heterps_sim.core.plan import SCHEDULES

Action = tuple[str, int]


def _gpipe(num_microbatches: int) -> list[Action]:
    return [("F", i) for i in range(num_microbatches)] + [("B", i) for i in range(num_microbatches)]


def _one_f_one_b(stage: int, num_stages: int, num_microbatches: int) -> list[Action]:
    warmup = min(num_stages - stage - 1, num_microbatches)
    actions: list[Action] = [("F", i) for i in range(warmup)]
    next_f, next_b = warmup, 0
    while next_f < num_microbatches:
        actions.append(("F", next_f))
        actions.append(("B", next_b))
        next_f, next_b = next_f + 1, next_b + 1
    actions += [("B", i) for i in range(next_b, num_microbatches)]
    return actions


def stage_actions(schedule: str, stage: int, num_stages: int, num_microbatches: int) -> list[Action]:
    """What stage `stage` (0-based) does in one step, in order."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if not 0 <= stage < num_stages:
        raise ValueError(f"stage {stage} outside 0..{num_stages - 1}")
    if num_microbatches < 1:
        raise ValueError("num_microbatches must be >= 1")
    if schedule == "gpipe":
        return _gpipe(num_microbatches)
    return _one_f_one_b(stage, num_stages, num_microbatches)


def max_live_activations(actions: list[Action]) -> int:
    """Most microbatches whose forward ran and backward has not (activation memory)."""
    live = peak = 0
    for action, _ in actions:
        live += 1 if action == "F" else -1
        peak = max(peak, live)
    return peak
