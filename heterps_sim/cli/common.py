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


def scheduler_name(args, loaded) -> str:
    """--scheduler, else the scenario's, else exact."""
    sched = loaded.scenario.schedule if loaded is not None and loaded.scenario else None
    return args.scheduler or (sched.scheduler if sched else "exact")


def run_scheduler(problem, name: str, mode: str, seed: int, options: dict, *,
                  note_cuts: bool = True):
    """Make the scheduler with its validated options and run it as the commands answer
    (schedulers/as_it_runs.py) -> ScheduleOutcome (`note_cuts`: with allow_same_type_cuts,
    also say what the cuts save, unless the plan was replaced by the flushed search's)."""
    from pydantic import ValidationError

    from heterps_sim.schedulers.as_it_runs import plan_as_it_runs
    from heterps_sim.schedulers.base import run_scheduler as run
    from heterps_sim.schedulers.registry import make_scheduler
    try:
        scheduler = make_scheduler(name, seed=seed, **options)
    except KeyError as exc:
        raise UserFileError(f"--scheduler: {exc.args[0]}") from None
    except ValidationError as exc:
        from heterps_sim.core.files import validation_message
        raise UserFileError(validation_message(f"scheduler {name} options", exc)) from None
    from heterps_sim.core import progress
    progress.phase(f"scheduling: {name} ({mode} provisioning)")
    outcome = plan_as_it_runs(scheduler, problem, mode)
    if not note_cuts:
        return outcome
    if (options.get("allow_same_type_cuts") and outcome.result is not None
            and "replaced_by" not in outcome.notes):
        # Say what cutting a run of one type into several stages saves (the paper's stages
        # are maximal runs).
        plain = make_scheduler(name, seed=seed, **{**options, "allow_same_type_cuts": False})
        base = run(plain, problem, mode, objective="flushed").result
        if base is not None and base.feasible:
            saved = base.cost_usd - outcome.result.cost_usd
            outcome.notes["cost_without_same_type_cuts_usd"] = base.cost_usd
            outcome.notes["same_type_cuts_save_pct"] = 100.0 * saved / base.cost_usd
    return outcome


def add_verify(p) -> None:
    """`--verify des|none` (schedule, simulate)."""
    p.add_argument("--verify", choices=["des", "none"], default="des",
                   help="des (default): run the plan in the simulator with the deterministic "
                   "effects on (bubbles, allreduce, transfers, contention, ps; seed 0) and "
                   "print its throughput and cost beside the model's; simulate also "
                   "re-provisions a plan the simulator finds short (studies/verify.py). "
                   "none: skip the check")


def verify_outcome(problem, outcome, mode: str, args, *, reprovision: bool, replan=None):
    """The simulator's check of a scheduled plan (studies.verify), or None when --verify
    none or there is no feasible plan to check; `replan(problem)` runs the same scheduler
    again (studies/replan.py: a raised throughput floor)."""
    if getattr(args, "verify", "none") == "none" or outcome.plan is None \
            or outcome.result is None or not outcome.result.feasible:
        return None
    from heterps_sim.core import progress
    from heterps_sim.cost import evaluate_plan
    from heterps_sim.studies.verify import verify_plan
    progress.phase("checking the plan in the simulator (--verify none skips it)")
    return verify_plan(problem, outcome.plan, outcome.result,
                       lambda plan: evaluate_plan(problem, plan, mode), reprovision=reprovision,
                       replan=replan)
