"""The plan commands: `schedule` (choose a plan), `simulate` (schedule + evaluate, write a run
folder, studies/run_folder.py), `compare` (every scheduler on one problem), `evaluate` (cost a
given plan, analytic or simulated) and `convert-plan` (rewrite a plan.json in today's format).

`--set help` (schedule, simulate) lists the scheduler's options instead of running it.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from heterps_sim.cli.common import (
    EXIT_INFEASIBLE,
    add_input,
    add_verify,
    dump,
    load,
    pipeline_setting,
    run_scheduler,
    schedule_settings,
    scheduler_flag,
    scheduler_name,
)
from heterps_sim.core.files import UserFileError, new_run_folder
from heterps_sim.core.outputs import atomic_write, check_target


def add_schedule(p) -> None:
    """The arguments of schedule and simulate."""
    add_input(p)
    p.add_argument("--scheduler", type=scheduler_flag,
                   help="scheduler name (default: the scenario's, else exact)")
    p.add_argument("--pipeline", choices=["gpipe", "1f1b", "async", "auto"],
                   help="the pipeline schedule plans are priced with (default: the scenario's "
                   "schedule.pipeline, else gpipe): gpipe/1f1b flush every step, async never "
                   "(stale gradients); auto plans under each and keeps the cheapest")
    p.add_argument("--mode", choices=["least", "exact"], help="provisioning mode")
    p.add_argument("--seed", type=int)
    p.add_argument("--allow-same-type-cuts", action="store_true",
                   help="exact scheduler: allow a pipeline cut between stages of one type "
                        "(the planner's default; --set allow_same_type_cuts=false keeps the "
                        "stage model to maximal runs)")
    p.add_argument("--mixed", action="store_true",
                   help="exact scheduler: also propose mixed-type stages where caps bind")
    p.add_argument("--out", help="plan.json path (schedule) or run folder (simulate)")
    add_verify(p)
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="a scheduler Config field, e.g. --set budget=5000 (repeatable); "
                   "--set help lists the scheduler's fields with type, default and meaning")


def _wants_options(args) -> bool:
    return "help" in (args.set or [])


def list_options(args) -> int:
    """`--set help`: every field of the scheduler's Config, with its type, default and the
    docstring under it (schedulers/fields.py)."""
    from heterps_sim.schedulers.fields import field_rows
    from heterps_sim.schedulers.registry import scheduler_class
    name = scheduler_name(args, None if args.scheduler else load(args.input, args.model))
    try:
        rows = field_rows(scheduler_class(name).Config)
    except KeyError as exc:
        raise UserFileError(f"--scheduler: {exc.args[0]}") from None
    if args.json:
        print(dump({"scheduler": name, "options": rows}))
        return 0
    print(f"scheduler {name}: options (--set KEY=VALUE, or schedule.options in a scenario)")
    for row in rows:
        default = repr(row["default"]) if isinstance(row["default"], str) else row["default"]
        print(f"  {row['name']}: {row['type']} = {default}")
        if row["description"]:
            print(textwrap.fill(row["description"], 96, initial_indent=" " * 6,
                                subsequent_indent=" " * 6))
    return 0


def cmd_schedule(args) -> int:
    if _wants_options(args):
        return list_options(args)
    if args.out:
        check_target(args.out)  # before the search, not after it
    loaded = load(args.input, args.model)
    name, mode, seed, options = schedule_settings(args, loaded)
    outcome = run_scheduler(loaded.problem, name, mode, seed, options,
                            check=args.verify != "none",
                            pipeline=pipeline_setting(args, loaded))
    check = outcome.check
    if outcome.plan is not None and args.out:
        atomic_write(Path(args.out), dump(outcome.plan.to_json_dict()))
    if args.json:
        print(dump({**outcome.to_json_dict(), "verify": check and check.to_json_dict()}))
    elif outcome.plan is None:
        print(f"{name}: no feasible plan: {outcome.notes.get('reason', '')}")
        print(outcome.optimality())
    else:
        from heterps_sim.plots.tables import result_table
        print(f"planner: {name} under the {outcome.pricing.describe()}, "
              f"{outcome.wall_s:.3f} s; {outcome.optimality()}")
        if outcome.schedule_line():
            print(outcome.schedule_line())
        print(result_table(outcome.result))
        if check is not None:
            from heterps_sim.planner.check import check_lines
            print("\n" + "\n".join(check_lines(check)))
        if args.out:
            print(f"plan written to {args.out}")
    # the analytic model's verdict (the check's is in the output; simulate acts on it)
    return 0 if outcome.result is not None and outcome.result.feasible else EXIT_INFEASIBLE


def cmd_simulate(args) -> int:
    from heterps_sim.plots.tables import result_table
    from heterps_sim.studies.run_folder import prepare_run_folder, write_run_folder
    if _wants_options(args):
        return list_options(args)
    loaded = load(args.input, args.model)
    name, mode, seed, options = schedule_settings(args, loaded)
    label = loaded.problem.name or "run"
    # the folder is made (or cleared of an earlier run's files) before the search
    out = prepare_run_folder(Path(args.out)) if args.out else new_run_folder(label)
    outcome = run_scheduler(loaded.problem, name, mode, seed, options,
                            repair=args.verify != "none",
                            pipeline=pipeline_setting(args, loaded))
    check = outcome.check
    write_run_folder(out, outcome.problem, outcome, scenario=loaded.scenario, seed=seed,
                     verification=check)
    if args.json:
        print(dump({**outcome.to_json_dict(), "verify": check and check.to_json_dict(),
                    "run_dir": str(out)}))
    else:
        p = loaded.problem
        print(f"scenario {label}: {p.num_layers} layers, {p.num_types} resource types, batch "
              f"{p.batch_size}, limit {p.throughput_limit:,.0f} samples/s, "
              f"{p.num_samples:,.0f} samples")
        print(f"planner: {name} under the {outcome.pricing.describe()}, "
              f"{outcome.wall_s:.3f} s; {outcome.optimality()}")
        print()
        if outcome.plan is None:
            print(f"no feasible plan: {outcome.notes.get('reason', '')}")
        else:
            if outcome.schedule_line():
                print(outcome.schedule_line())
            print(result_table(outcome.result))
            print(_versus_one_type(outcome))
            if check is not None:
                from heterps_sim.planner.check import check_lines
                print("\n" + "\n".join(check_lines(check)))
        print(f"\nrun folder: {out}")
    if check is not None:
        return 0 if check.meets_limit else EXIT_INFEASIBLE
    return 0 if outcome.result is not None and outcome.result.feasible else EXIT_INFEASIBLE


def _notes(notes: dict) -> str:
    return ", ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in notes.items())


def _versus_one_type(answer) -> str:
    """What mixing types and pipelining each save, against the best one-type plans under the
    same pricing (planner/baseline.py)."""
    from heterps_sim.planner.baseline import effects_lines, one_type_baselines
    return "\n".join(effects_lines(answer, one_type_baselines(answer.problem, answer.pricing)))


def add_compare(p) -> None:
    add_input(p)
    p.add_argument("--schedulers", help="comma list (default: every registered scheduler)")
    p.add_argument("--budget", type=int, help="evaluations for every budgeted search")
    p.add_argument("--mode", choices=["least", "exact"], default="least")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="also write the table as CSV here")


def cmd_compare(args) -> int:
    from heterps_sim.studies.compare import compare
    if args.out:
        check_target(args.out)
    if args.budget is not None and args.budget < 1:
        raise UserFileError(f"--budget: expected a positive number of evaluations, got "
                            f"{args.budget}")
    loaded = load(args.input, args.model)
    names = [n.strip() for n in args.schedulers.split(",")] if args.schedulers else None
    try:
        frame = compare(loaded.problem, names, mode=args.mode, budget=args.budget, seed=args.seed)
    except KeyError as exc:
        raise UserFileError(f"--schedulers: {exc.args[0]}") from None
    if args.out:
        atomic_write(Path(args.out), frame.to_csv(index=False))
    if args.json:
        print(dump(json.loads(frame.to_json(orient="records"))))
    else:
        import pandas as pd
        with pd.option_context("display.width", 200, "display.max_colwidth", 60):
            print(frame.drop(columns=["reason"]).to_string(index=False, formatters={
                "cost_usd": "{:,.6g}".format, "gap_pct": "{:.2f}".format,
                "throughput": "{:,.0f}".format, "wall_s": "{:.3f}".format}))
        if args.out:
            print(f"table written to {args.out}")
    return 0


def add_evaluate(p) -> None:
    from heterps_sim.cli.des import add_des_arguments
    add_input(p, required=True)
    p.add_argument("plan", help="plan.json")
    p.add_argument("--mode", choices=["least", "exact"], default="least")
    p.add_argument("--engine", choices=["analytic", "des"], default="analytic",
                   help="analytic model or the SimPy simulator")
    p.add_argument("--trace", help="des: write a Chrome/Perfetto trace JSON here")
    add_des_arguments(p)


def cmd_evaluate(args) -> int:
    from heterps_sim.inputs.load import load_plan
    from heterps_sim.planner import Pricing
    if getattr(args, "trace", None):
        check_target(args.trace)  # before the simulation
    loaded = load(args.input, args.model)
    try:
        plan = load_plan(args.plan)
        pricing = Pricing.of(loaded.problem, schedule=plan.schedule, provisioning=args.mode)
        plan, result = pricing.price(loaded.problem, plan)  # checks the plan fits
    except UserFileError as exc:  # PlanError included: named after the plan file
        msg = str(exc)
        raise UserFileError(msg if msg.startswith(str(args.plan)) else f"{args.plan}: {msg}") \
            from None
    from heterps_sim.cli.des import check_slow_replicas
    check_slow_replicas(args, plan)
    if args.engine == "des":
        from heterps_sim.cli.des import evaluate_des
        result = evaluate_des(loaded.problem, plan, args)
    if args.json:
        print(dump(result.to_json_dict()))
    else:
        from heterps_sim.plots.tables import result_table
        print(result_table(result))
    return 0 if result.feasible else EXIT_INFEASIBLE


def add_convert_plan(p) -> None:
    p.add_argument("plan", help="plan.json of any readable format")
    p.add_argument("-o", "--out", help="write here (default: print to stdout)")


def cmd_convert_plan(args) -> int:
    """Rewrite a plan.json in the current format (older formats are upgraded on load)."""
    from heterps_sim.core.plan import FORMAT_VERSION
    from heterps_sim.inputs.load import load_plan
    if args.out:
        check_target(args.out)
    plan = load_plan(args.plan)
    text = dump(plan.to_json_dict())
    if args.out:
        atomic_write(Path(args.out), text)
        if not args.json:
            print(f"{args.plan} -> {args.out} (format_version {FORMAT_VERSION})", file=sys.stderr)
    else:
        print(text, end="")
    return 0


HANDLERS = {"schedule": (add_schedule, cmd_schedule), "simulate": (add_schedule, cmd_simulate),
            "compare": (add_compare, cmd_compare), "evaluate": (add_evaluate, cmd_evaluate),
            "convert-plan": (add_convert_plan, cmd_convert_plan)}
"""Command name -> (add its arguments to a parser, run it with the parsed args)."""
