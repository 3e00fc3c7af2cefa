"""The simulator's commands: `evaluate --engine des` and `effects` (what the analytic model misses).

Kept apart from cli.py so the analytic commands never import simpy.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


class EffectsError(ValueError):
    """An unknown effect name on the command line."""


def parse_effects(text: str | None) -> frozenset[str]:
    """"none" | "all" | a comma list of effect names (des.parse_effects), as CLI input."""
    from .des import parse_effects as parse
    try:
        return parse(text)
    except ValueError as exc:
        raise EffectsError(f"--effects: {exc}") from None


def add_des_arguments(p: argparse.ArgumentParser, *, effects: bool = True) -> None:
    p.add_argument("--schedule", choices=["gpipe", "1f1b", "async"],
                   help="des: microbatch schedule (default: the plan's)")
    p.add_argument("--microbatches", type=int, help="des: microbatches per step")
    p.add_argument("--steps", type=int, help="des: training steps to simulate")
    if effects:
        p.add_argument("--effects", help="des: none | all | comma list (e.g. bubbles,allreduce)")
    p.add_argument("--seed", type=int, default=0, help="des: seed of the variability effects")


def des_options(args, effects: frozenset[str] | None = None):
    from .des import DesOptions
    fields: dict = {"effects": parse_effects(args.effects) if effects is None else effects}
    # (the effects command sets `effects` per row; it has no --effects flag)
    if args.schedule:
        fields["schedule"] = args.schedule
    if args.microbatches is not None:
        fields["num_microbatches"] = args.microbatches
    if args.steps is not None:
        fields["num_steps"] = args.steps
    return DesOptions(**fields)


def evaluate_des(problem, plan, args, write):
    """Simulate one plan; write the trace when asked. Returns the RunResult."""
    from .des import simulate
    from .trace import chrome_trace
    run = simulate(problem, plan, seed=args.seed, options=des_options(args),
                   record_spans=bool(args.trace))
    if args.trace:
        meta = {"scenario": problem.name, "plan": plan.to_json_dict(), "seed": args.seed}
        write(Path(args.trace), json.dumps(chrome_trace(run.spans, meta)) + "\n")
    return run.result


def effects_rows(problem, plan, args, mode: str):
    """One row per configuration: analytic, DES with all off, each effect alone, all on."""
    from tqdm import tqdm

    from .cost import evaluate_plan
    from .des import EFFECTS, simulate
    analytic = evaluate_plan(problem, plan, mode)
    configs = [("des: all off", frozenset())] + [(f"des: {e} only", frozenset([e])) for e in EFFECTS]
    configs.append(("des: all on", frozenset(EFFECTS)))
    rows = [_row("analytic", analytic, analytic)]
    for label, effects in tqdm(configs, desc="effects", unit="run", leave=False, disable=None):
        run = simulate(problem, plan, seed=args.seed, options=des_options(args, effects),
                       record_spans=False)
        rows.append(_row(label, run.result, analytic))
    return rows


def _row(label: str, result, analytic) -> dict:
    ref = analytic.throughput
    return {"configuration": label, "feasible": result.feasible, "throughput": result.throughput,
            "vs analytic %": 100.0 * (result.throughput / ref - 1.0) if ref > 0 else float("nan"),
            "step ms": result.step_time_s * 1e3, "cost USD": result.cost_usd,
            "bubble": result.extra.get("bubble_fraction", 0.0)}
