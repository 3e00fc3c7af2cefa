"""What the heterps-sim commands share: reading the input, printing JSON, running a scheduler.

Bad input raises `UserFileError` (core.files) with one line naming the file, the field and the
problem; cli/__init__.py prints it and exits 2. Nothing heavy is imported at the top.
"""

from __future__ import annotations

import json

from heterps_sim.core.files import EXIT_BAD_INPUT, UserFileError  # noqa: F401  (EXIT_BAD_INPUT: for the commands)

EXIT_INFEASIBLE = 1


def dump(data) -> str:
    """One JSON document, as every --json prints it."""
    return json.dumps(data, indent=1, default=str) + "\n"


def load(path, model: str | None = None):
    """A scenario YAML, a problem JSON, or None (the built-in default scenario) ->
    inputs.load.LoadedInput (under `model` when given: --model); raises UserFileError."""
    from heterps_sim.inputs.load import load_input
    return load_input(path, model)


def add_input(p, *, required: bool = False) -> None:
    """The positional scenario/problem argument."""
    if required:
        p.add_argument("input", help="scenario YAML or problem JSON")
    else:
        p.add_argument("input", nargs="?", help="scenario YAML or problem JSON (default: built-in)")
    p.add_argument("--model", choices=("default", "paper"), default=None,
                   help="analytic cost model: default (all-reduce, fixed costs, memory, PS "
                        "bandwidth, startup and billing) or paper (HeterPS's Amdahl model); "
                        "default: the input's costs.model")


def schedule_settings(args, loaded) -> tuple[str, str, int, dict]:
    """(scheduler name, mode, seed, Config options): the flags over the scenario's schedule
    section over the defaults (exact, least, 0); `--set KEY=VALUE` values are YAML."""
    sched = loaded.scenario.schedule if loaded.scenario else None
    name = scheduler_name(args, loaded)
    mode = args.mode or (sched.mode if sched else "least")
    seed = args.seed if args.seed is not None else (sched.seed if sched else 0)
    options = dict(sched.options) if sched and name == sched.scheduler else {}
    if getattr(args, "allow_same_type_cuts", False):
        options["allow_same_type_cuts"] = True
    if getattr(args, "mixed", False):
        options["mixed"] = True
    for item in getattr(args, "set", None) or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UserFileError(f"--set {item!r}: expected KEY=VALUE (a field of the scheduler's "
                                "Config)")
        from heterps_sim.core.files import load_yaml, non_finite_path
        parsed = load_yaml(value, f"--set {key.strip()}")  # aliases bounded, no Python tags
        if non_finite_path(parsed):
            raise UserFileError(f"--set {key.strip()}: must be a finite number (no NaN or "
                                "infinity)")
        options[key.strip()] = parsed
    return name, mode, seed, options


def scheduler_flag(text: str) -> str:
    """argparse `type=` of --scheduler: a registered scheduler's name, checked while the line
    is parsed (also where a given plan leaves the flag unused: `effects SCENARIO PLAN`)."""
    import argparse

    from heterps_sim.schedulers.registry import SCHEDULERS, scheduler_names
    if text not in SCHEDULERS:
        raise argparse.ArgumentTypeError(f"unknown scheduler {text!r} (known: "
                                         f"{', '.join(scheduler_names())})")
    return text


def scheduler_name(args, loaded) -> str:
    """--scheduler, else the scenario's, else exact."""
    sched = loaded.scenario.schedule if loaded is not None and loaded.scenario else None
    return args.scheduler or (sched.scheduler if sched else "exact")


def pipeline_setting(args, loaded) -> str:
    """--pipeline, else the scenario's schedule.pipeline, else gpipe."""
    sched = loaded.scenario.schedule if loaded is not None and loaded.scenario else None
    return getattr(args, "pipeline", None) or (sched.pipeline if sched else "gpipe")


def make_planner(name: str, mode: str, seed: int, options: dict, pipeline: str = "gpipe"):
    """The planner of the commands (planner/planner.py): the search `name` with its validated
    options, the problem's pricing under provisioning `mode`."""
    from pydantic import ValidationError

    from heterps_sim.planner import Planner
    from heterps_sim.schedulers.registry import make_scheduler
    try:
        make_scheduler(name, seed=seed, **options)  # validates the name and options
    except KeyError as exc:
        raise UserFileError(f"--scheduler: {exc.args[0]}") from None
    except ValidationError as exc:
        from heterps_sim.core.files import validation_message
        raise UserFileError(validation_message(f"scheduler {name} options", exc)) from None
    return Planner(search=name, options=dict(options), seed=seed, provisioning=mode,
                   schedule=pipeline)


def run_scheduler(problem, name: str, mode: str, seed: int, options: dict, *,
                  check: bool = False, repair: bool = False, pipeline: str = "gpipe"):
    """The planner's answer for `problem` (planner.Answer), as every command prints it; with
    `check` its simulator check (answer.check), with `repair` a short plan repaired;
    `pipeline` the schedule (gpipe | 1f1b | async | auto)."""
    from heterps_sim.util import progress
    planner = make_planner(name, mode, seed, options, pipeline)
    priced = ("each of gpipe, 1f1b and async" if pipeline == "auto"
              else planner.pricing_for(problem).describe())
    progress.phase(f"planning: {name} ({priced})")
    auto = pipeline == "auto" and (check or repair)
    try:
        # auto with the check: each schedule's answer is checked and the cheapest the
        # simulator stands behind is kept (Planner._auto)
        answer = planner.plan(problem, check=auto, repair=repair and auto)
    except ValueError as exc:
        raise UserFileError(f"--scheduler {name}: {exc}") from None
    if (check or repair) and answer.feasible and not auto:
        progress.phase("checking the plan in the simulator (--verify none skips it)")
        answer.check = planner.check(answer, repair=repair)
    return answer


def add_verify(p) -> None:
    """`--verify des|none` (schedule, simulate)."""
    p.add_argument("--verify", choices=["des", "none"], default="des",
                   help="des (default): run the plan in the simulator with the deterministic "
                   "effects on (bubbles, allreduce, transfers, contention, ps; seed 0) and "
                   "print its throughput and cost beside the model's; simulate also "
                   "re-provisions a plan the simulator finds short (studies/verify.py). "
                   "none: skip the check")
