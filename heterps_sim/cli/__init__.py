"""`heterps-sim`: catalog, check, problem, schedule, evaluate, simulate, tradeoff, plot, report.

Every command takes a scenario YAML or a problem JSON (none: the built-in default scenario);
`--json` prints one JSON document to stdout. Bad input prints one line naming the file, the
field and the problem, and exits 2. Exit 1 means the input was fine but no plan meets the
throughput limit.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from heterps_sim.core.files import atomic_write as _atomic_write

EXIT_INFEASIBLE, EXIT_BAD_INPUT = 1, 2


class CliError(Exception):
    """Bad input: one line, exit 2."""


def _dump(data) -> str:
    return json.dumps(data, indent=1, default=str) + "\n"


def _load(path):
    from heterps_sim.inputs.load import InputError, load_input
    try:
        return load_input(path)
    except InputError as exc:
        raise CliError(str(exc)) from None


def cmd_catalog(args) -> int:
    from heterps_sim.inputs import catalog
    types = catalog.select(catalog.load_catalog(), kind=args.kind)
    if args.json:
        from dataclasses import asdict
        print(_dump([asdict(t) for t in types]))
    else:
        import pandas as pd
        with pd.option_context("display.width", 200, "display.max_rows", 500):
            print(catalog.catalog_frame(types).to_string(index=False))
        print(f"\n{len(types)} resource types ({catalog.CATALOG_PATH})")
    return 0


def cmd_check(args) -> int:
    from heterps_sim.schedulers.registry import SCHEDULERS
    rows, bad = [], 0
    for path in args.scenarios or [None]:
        try:
            loaded = _load(path)
            scn = loaded.scenario
            if scn is not None and scn.schedule.scheduler not in SCHEDULERS:
                raise CliError(f"{path}: schedule.scheduler: unknown scheduler {scn.schedule.scheduler!r}")
            p = loaded.problem
            rows.append({"input": str(path or "default"), "ok": True, "layers": p.num_layers,
                         "types": p.num_types, "throughput_limit": p.throughput_limit,
                         "runnable_entries": int(p.runnable.sum())})
        except CliError as exc:
            bad += 1
            rows.append({"input": str(path), "ok": False, "error": str(exc)})
    if args.json:
        print(_dump(rows))
    else:
        for r in rows:
            if r["ok"]:
                print(f"ok    {r['input']}: {r['layers']} layers x {r['types']} types, limit "
                      f"{r['throughput_limit']:,.0f} samples/s")
            else:
                print(f"heterps-sim check: {' '.join(r['error'].split())}", file=sys.stderr)
    return EXIT_BAD_INPUT if bad else 0


def cmd_problem(args) -> int:
    p = _load(args.input).problem
    if args.json:
        print(_dump(p.to_json_dict()))
    else:
        print(f"{p.name}: {p.num_layers} layers x {p.num_types} types, batch {p.batch_size}, "
              f"limit {p.throughput_limit:,.6g} samples/s, {p.num_samples:,.6g} samples; "
              f"{int(p.runnable.sum())} of {p.runnable.size} (layer, type) entries runnable. "
              "Use --json for the numbers.")
    return 0


def _run_scheduler(problem, name: str, mode: str, seed: int, options: dict):
    from heterps_sim.schedulers.base import run_scheduler
    from heterps_sim.schedulers.registry import make_scheduler
    try:
        scheduler = make_scheduler(name, seed=seed, **options)
    except KeyError as exc:
        raise CliError(f"--scheduler: {exc.args[0]}") from None
    except ValidationError as exc:
        from heterps_sim.core.files import validation_message
        raise CliError(validation_message(f"scheduler {name} options", exc)) from None
    outcome = run_scheduler(scheduler, problem, mode)
    if options.get("allow_same_type_cuts") and outcome.result is not None:
        # Say what cutting a run of one type into several stages saves (the paper's stages
        # are maximal runs).
        plain = make_scheduler(name, seed=seed, **{**options, "allow_same_type_cuts": False})
        base = run_scheduler(plain, problem, mode).result
        if base is not None and base.feasible:
            saved = base.cost_usd - outcome.result.cost_usd
            outcome.notes["cost_without_same_type_cuts_usd"] = base.cost_usd
            outcome.notes["same_type_cuts_save_pct"] = 100.0 * saved / base.cost_usd
    return outcome


def _schedule_settings(args, loaded):
    sched = loaded.scenario.schedule if loaded.scenario else None
    name = args.scheduler or (sched.scheduler if sched else "exact")
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
            raise CliError(f"--set {item!r}: expected KEY=VALUE (a field of the scheduler's Config)")
        import yaml
        options[key.strip()] = yaml.safe_load(value)
    return name, mode, seed, options


def cmd_schedule(args) -> int:
    loaded = _load(args.input)
    name, mode, seed, options = _schedule_settings(args, loaded)
    outcome = _run_scheduler(loaded.problem, name, mode, seed, options)
    if outcome.plan is not None and args.out:
        _atomic_write(Path(args.out), _dump(outcome.plan.to_json_dict()))
    if args.json:
        print(_dump(outcome.to_json_dict()))
    elif outcome.plan is None:
        print(f"{name}: no feasible plan: {outcome.notes.get('reason', '')}")
    else:
        from heterps_sim.plots.tables import result_table
        print(f"scheduler {name} ({mode} provisioning): {outcome.evaluations} evaluations, "
              f"{outcome.wall_s:.3f} s" + (f"; {_notes(outcome.notes)}" if outcome.notes else ""))
        print(result_table(outcome.result))
        if args.out:
            print(f"plan written to {args.out}")
    return 0 if outcome.result is not None and outcome.result.feasible else EXIT_INFEASIBLE


def cmd_evaluate(args) -> int:
    from heterps_sim.cost.reference import PlanError, evaluate_plan
    from heterps_sim.inputs.load import InputError, load_plan
    loaded = _load(args.input)
    try:
        plan = load_plan(args.plan)
        result = evaluate_plan(loaded.problem, plan, args.mode)  # checks the plan fits
    except (InputError, PlanError) as exc:
        msg = str(exc)
        raise CliError(msg if msg.startswith(str(args.plan)) else f"{args.plan}: {msg}") from None
    if args.engine == "des":
        result = _evaluate_des(loaded.problem, plan, args)
    if args.json:
        print(_dump(result.to_json_dict()))
    else:
        from heterps_sim.plots.tables import result_table
        print(result_table(result))
    return 0 if result.feasible else EXIT_INFEASIBLE


def cmd_convert_plan(args) -> int:
    """Rewrite a plan.json in the current format (older formats are upgraded on load)."""
    from heterps_sim.core.plan import FORMAT_VERSION
    from heterps_sim.inputs.load import InputError, load_plan
    try:
        plan = load_plan(args.plan)
    except InputError as exc:
        raise CliError(str(exc)) from None
    text = _dump(plan.to_json_dict())
    if args.out:
        _atomic_write(Path(args.out), text)
        if not args.json:
            print(f"{args.plan} -> {args.out} (format_version {FORMAT_VERSION})", file=sys.stderr)
    else:
        print(text, end="")
    return 0


def _evaluate_des(problem, plan, args):
    from pydantic import ValidationError as PydanticError

    from heterps_sim.cli.des import EffectsError, evaluate_des
    try:
        return evaluate_des(problem, plan, args, _atomic_write)
    except EffectsError as exc:
        raise CliError(str(exc)) from None
    except PydanticError as exc:
        from heterps_sim.core.files import validation_message
        raise CliError(validation_message("simulator options", exc)) from None


def cmd_effects(args) -> int:
    from pydantic import ValidationError as PydanticError

    from heterps_sim.cli.des import EffectsError, effects_rows
    from heterps_sim.cost.reference import PlanError
    from heterps_sim.inputs.load import InputError, load_plan
    loaded = _load(args.input)
    if args.plan:
        try:
            plan = load_plan(args.plan)
        except InputError as exc:
            raise CliError(str(exc)) from None
    else:
        name, mode, seed, options = _schedule_settings(args, loaded)
        plan = _run_scheduler(loaded.problem, name, mode, seed, options).plan
        if plan is None:
            print("no feasible plan to simulate")
            return EXIT_INFEASIBLE
    try:
        rows = effects_rows(loaded.problem, plan, args, args.mode or "least")
    except (PlanError, EffectsError) as exc:
        raise CliError(f"{args.plan or 'plan'}: {exc}") from None
    except PydanticError as exc:
        from heterps_sim.core.files import validation_message
        raise CliError(validation_message("simulator options", exc)) from None
    if args.json:
        print(_dump(rows))
    else:
        import pandas as pd
        frame = pd.DataFrame(rows)
        print(frame.to_string(index=False, formatters={
            "throughput": "{:,.0f}".format, "vs analytic %": "{:+.2f}".format,
            "step ms": "{:.4g}".format, "cost USD": "{:,.6g}".format, "bubble": "{:.3f}".format}))
    return 0


def cmd_compare(args) -> int:
    from heterps_sim.studies.compare import compare
    loaded = _load(args.input)
    names = [n.strip() for n in args.schedulers.split(",")] if args.schedulers else None
    try:
        frame = compare(loaded.problem, names, mode=args.mode, budget=args.budget, seed=args.seed)
    except KeyError as exc:
        raise CliError(f"--schedulers: {exc.args[0]}") from None
    if args.out:
        _atomic_write(Path(args.out), frame.to_csv(index=False))
    if args.json:
        print(_dump(json.loads(frame.to_json(orient="records"))))
    else:
        import pandas as pd
        with pd.option_context("display.width", 200, "display.max_colwidth", 60):
            print(frame.drop(columns=["reason"]).to_string(index=False, formatters={
                "cost_usd": "{:,.6g}".format, "gap_pct": "{:.2f}".format,
                "throughput": "{:,.0f}".format, "wall_s": "{:.3f}".format}))
        if args.out:
            print(f"table written to {args.out}")
    return 0


def cmd_simulate(args) -> int:
    import yaml

    from heterps_sim.plots.tables import result_table, stages_frame
    loaded = _load(args.input)
    name, mode, seed, options = _schedule_settings(args, loaded)
    outcome = _run_scheduler(loaded.problem, name, mode, seed, options)
    label = loaded.problem.name or "run"
    out = Path(args.out) if args.out else Path("runs") / f"{label}-{datetime.now():%Y%m%d-%H%M%S}"
    if loaded.scenario is not None:
        _atomic_write(out / "scenario.yaml", yaml.safe_dump(loaded.scenario.model_dump(), sort_keys=False))
    _atomic_write(out / "problem.json", _dump(loaded.problem.to_json_dict()))
    _atomic_write(out / "schedule.json", _dump(outcome.to_json_dict()))
    if outcome.plan is not None:
        _atomic_write(out / "plan.json", _dump(outcome.plan.to_json_dict()))
        _atomic_write(out / "result.json", _dump(outcome.result.to_json_dict()))
        _atomic_write(out / "stages.csv", stages_frame(outcome.result).to_csv(index=False))
        from heterps_sim.cli.tradeoff import (
            write_run_trace,  # trace.json: `heterps-sim plot` draws it
        )
        write_run_trace(loaded.problem, outcome.plan, out / "trace.json", seed, _atomic_write)
    if args.json:
        print(_dump({**outcome.to_json_dict(), "run_dir": str(out)}))
    else:
        p = loaded.problem
        print(f"scenario {label}: {p.num_layers} layers, {p.num_types} resource types, batch "
              f"{p.batch_size}, limit {p.throughput_limit:,.0f} samples/s, {p.num_samples:,.0f} samples")
        print(f"scheduler {name} ({mode} provisioning), {outcome.wall_s:.3f} s\n")
        if outcome.plan is None:
            print(f"no feasible plan: {outcome.notes.get('reason', '')}")
        else:
            print(result_table(outcome.result))
            print(_versus_single_type(loaded.problem, mode, outcome.result))
        print(f"\nrun folder: {out}")
    return 0 if outcome.result is not None and outcome.result.feasible else EXIT_INFEASIBLE


def _notes(notes: dict) -> str:
    return ", ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in notes.items())


def _versus_single_type(problem, mode: str, result) -> str:
    """How the plan compares with the best plan that uses one type for every layer."""
    from heterps_sim.schedulers.base import run_scheduler
    from heterps_sim.schedulers.registry import make_scheduler
    base = run_scheduler(make_scheduler("homogeneous"), problem, mode).result
    if base is None or not base.feasible:
        return "best single-type plan: none meets the limit"
    ratio = base.cost_usd / result.cost_usd
    return (f"best single-type plan: {base.stages[0].resource} x{base.stages[0].num_replicas}, "
            f"{base.cost_usd:,.6g} USD ({ratio:.2f}x this plan's cost)")


def _parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    ap = argparse.ArgumentParser(prog="heterps-sim", formatter_class=fmt, description=__doc__,
                                 epilog="example: heterps-sim simulate scenarios/dlrm-64types.yaml")
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("train-rl", help="train an RL scheduler's policy on one or many problems: "
                   "--scheduler rl-paper (default) or rl (see heterps-sim train-rl "
                   "[--scheduler rl] --help)", add_help=False)

    def add(name, func, help_, example):
        p = sub.add_parser(name, help=help_, description=help_, epilog=f"example: {example}",
                           formatter_class=fmt)
        p.set_defaults(func=func)
        p.add_argument("--json", action="store_true", help="print one JSON document")
        return p

    p = add("catalog", cmd_catalog, "list the resource types", "heterps-sim catalog --kind gpu")
    p.add_argument("--kind", choices=["cpu", "gpu"])
    p = add("check", cmd_check, "validate scenario files", "heterps-sim check scenarios/*.yaml")
    p.add_argument("scenarios", nargs="*")
    p = add("problem", cmd_problem, "export the numeric problem",
            "heterps-sim problem scenarios/ctr-dnn.yaml --json > problem.json")
    p.add_argument("input", nargs="?")
    for name, func, help_, ex in (
            ("schedule", cmd_schedule, "choose a plan", "heterps-sim schedule scenarios/dlrm-64types.yaml --scheduler exact --out plan.json"),
            ("simulate", cmd_simulate, "schedule + evaluate, write a run folder", "heterps-sim simulate scenarios/ctr-dnn.yaml")):
        p = add(name, func, help_, ex)
        p.add_argument("input", nargs="?", help="scenario YAML or problem JSON (default: built-in)")
        p.add_argument("--scheduler", help="scheduler name (default: the scenario's, else exact)")
        p.add_argument("--mode", choices=["least", "exact"], help="provisioning mode")
        p.add_argument("--seed", type=int)
        p.add_argument("--allow-same-type-cuts", action="store_true",
                       help="exact scheduler: allow a pipeline cut between stages of one type")
        p.add_argument("--mixed", action="store_true",
                       help="exact scheduler: also propose mixed-type stages where caps bind")
        p.add_argument("--out", help="plan.json path (schedule) or run folder (simulate)")
        p.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="a scheduler Config field, e.g. --set budget=5000 (repeatable)")
    p = add("compare", cmd_compare, "every scheduler on one problem, with its gap to the optimum",
            "heterps-sim compare scenarios/dlrm-64types.yaml --budget 20000 --out compare.csv")
    p.add_argument("input", nargs="?", help="scenario YAML or problem JSON (default: built-in)")
    p.add_argument("--schedulers", help="comma list (default: every registered scheduler)")
    p.add_argument("--budget", type=int, help="evaluations for every budgeted search")
    p.add_argument("--mode", choices=["least", "exact"], default="least")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="also write the table as CSV here")
    p = add("evaluate", cmd_evaluate, "cost a given plan",
            "heterps-sim evaluate scenarios/ctr-dnn.yaml plan.json --mode exact")
    p.add_argument("input", help="scenario YAML or problem JSON")
    p.add_argument("plan", help="plan.json")
    p.add_argument("--mode", choices=["least", "exact"], default="least")
    p.add_argument("--engine", choices=["analytic", "des"], default="analytic",
                   help="analytic model or the SimPy simulator")
    p.add_argument("--trace", help="des: write a Chrome/Perfetto trace JSON here")
    from heterps_sim.cli.des import add_des_arguments
    add_des_arguments(p)
    p = add("convert-plan", cmd_convert_plan, "rewrite a plan.json in the current format "
            "(format 2: mixed-type stages)", "heterps-sim convert-plan old.json -o plan.json")
    p.add_argument("plan", help="plan.json of any readable format")
    p.add_argument("-o", "--out", help="write here (default: print to stdout)")
    p = add("effects", cmd_effects, "what the analytic model misses: each simulator effect alone",
            "heterps-sim effects scenarios/dlrm-64types.yaml --schedule 1f1b")
    p.add_argument("input", nargs="?", help="scenario YAML or problem JSON (default: built-in)")
    p.add_argument("plan", nargs="?", help="plan.json (default: the scenario's scheduler's plan)")
    p.add_argument("--scheduler")
    p.add_argument("--mode", choices=["least", "exact"], help="provisioning mode")
    add_des_arguments(p, effects=False)
    p.set_defaults(allow_same_type_cuts=False)
    from heterps_sim.cli.tradeoff import add_commands  # tradeoff, plot, report (bodies live there)
    add_commands(add)
    return ap


def _train_rl_scheduler(argv: list[str]) -> tuple[list[str], str]:
    """(argv without --scheduler X, X) for train-rl; X is "rl-paper" when not given."""
    rest, which, i = [], "rl-paper", 0
    while i < len(argv):
        if argv[i] == "--scheduler" and i + 1 < len(argv):
            which, i = argv[i + 1], i + 2
            continue
        if argv[i].startswith("--scheduler="):
            which = argv[i].partition("=")[2]
        else:
            rest.append(argv[i])
        i += 1
    return rest, which


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["train-rl"]:
        # The training scripts own their flags (one readable file with an Args dataclass);
        # --scheduler picks which: rl-paper (schedulers/rl/paper/train.py, the default) or rl (schedulers/rl/stagewise/train.py).
        rest, which = _train_rl_scheduler(argv[1:])
        if which == "rl":
            from heterps_sim.schedulers.rl.stagewise.train import main as train_main
        elif which == "rl-paper":
            from heterps_sim.schedulers.rl.paper.train import main as train_main
        else:
            print(f"heterps-sim train-rl: --scheduler: expected rl or rl-paper, got {which!r}",
                  file=sys.stderr)
            return EXIT_BAD_INPUT
        return train_main(rest)
    args = _parser().parse_args(argv)
    try:
        return args.func(args)
    except CliError as exc:
        one_line = " ".join(str(exc).split())  # parsers' messages may span lines
        print(f"heterps-sim {args.command}: {one_line}", file=sys.stderr)
        return EXIT_BAD_INPUT

