"""The trade-off commands: `tradeoff` (sweep + figures), `plot` (redraw from files), `report`.

The folder a sweep writes is described in studies/sweep_files.py, a run folder in
studies/run_folder.py; `plot` redraws either from its files.
"""

from __future__ import annotations

import sys
from pathlib import Path

from heterps_sim.cli.common import add_input, dump, load
from heterps_sim.core.files import UserFileError, new_run_folder


def add_tradeoff(p) -> None:
    add_input(p)
    p.add_argument("--schedulers", help="comma list (default: exact + every fast scheduler)")
    p.add_argument("--limits", metavar="LO:HI", help="samples/s (default: from the cheapest "
                   "plan's throughput to the highest reachable)")
    p.add_argument("--points", type=int, default=20, help="limits, log-spaced (default 20)")
    p.add_argument("--engine", choices=["analytic", "des"], default="analytic",
                   help="cost each plan with the analytic model or the simulator")
    p.add_argument("--effects", help="des: none | all | comma list, e.g. bubbles,allreduce "
                   "(slow at limits that need thousands of units: pass --limits)")
    p.add_argument("--mode", choices=["least", "exact"], default="exact",
                   help="provisioning mode (default exact: cost never falls as the limit rises)")
    p.add_argument("--budget", type=int, default=2000,
                   help="evaluations for every budgeted search (default 2000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--out", help="output folder (default: runs/tradeoff-<name>-<time>)")


MAX_POINTS = 10_000
"""Limits in one sweep (each is a full scheduler run per scheduler)."""
MAX_JOBS = 256


def _check_counts(args) -> None:
    """--points and --jobs (and --budget where given) in range, before any work."""
    if not 1 <= args.jobs <= MAX_JOBS:
        raise UserFileError(f"--jobs: expected 1..{MAX_JOBS} worker processes, got {args.jobs}")
    if not 1 <= args.points <= MAX_POINTS:
        raise UserFileError(f"--points: expected 1..{MAX_POINTS:,} limits, got {args.points}")
    if getattr(args, "budget", None) is not None and args.budget < 1:
        raise UserFileError(f"--budget: expected a positive number of evaluations, got "
                            f"{args.budget}")


def cmd_tradeoff(args) -> int:
    _check_counts(args)
    loaded = load(args.input, args.model)
    spec, limits_how = _spec(args, loaded.problem)  # SweepError: a UserFileError
    from heterps_sim.studies.sweep import run_sweep
    from heterps_sim.studies.sweep_files import prepare_sweep_folder, sweep_meta, write_sweep
    label = loaded.problem.name or "problem"
    # before the sweep: an --out folder is created, or cleared of an earlier sweep's files
    # (refused if it holds others), so a typo costs nothing and stale plans never survive
    out = prepare_sweep_folder(Path(args.out)) if args.out else new_run_folder(f"tradeoff-{label}")
    result = run_sweep(loaded.problem, spec, jobs=args.jobs)  # a bar on stderr (util.progress)
    meta = sweep_meta(loaded, spec, result, limits_how, out, args.jobs)
    figures = write_sweep(out, loaded, result, meta)
    if args.json:
        print(dump({"folder": str(out), **meta, "figures": [str(p) for p in figures]}))
        return 0
    _print_summary(result.frame, out, meta, figures)
    return 0


def _spec(args, problem):
    from dataclasses import replace

    from heterps_sim.studies.sweep import SweepSpec, choose_limits, fast_schedulers
    names = ([n.strip() for n in args.schedulers.split(",") if n.strip()] if args.schedulers
             else fast_schedulers())
    effects = ()
    if args.effects:
        from heterps_sim.cli.des import parse_effects
        effects = tuple(sorted(parse_effects(args.effects)))
    # every setting is checked before the (possibly long) search for the default limits
    spec = SweepSpec(schedulers=tuple(names), limits=(1.0,), mode=args.mode, engine=args.engine,
                     effects=effects, budget=args.budget, seed=args.seed)
    limits, how = choose_limits(problem, args.limits, args.points, args.mode)
    return replace(spec, limits=limits), how


def _print_summary(frame, out: Path, meta: dict, figures) -> None:
    import pandas as pd
    summary = frame.groupby("scheduler", sort=False).agg(
        feasible=("feasible", "sum"), points=("feasible", "size"),
        cheapest_usd=("cost_usd", "min"), fastest=("throughput", "max"), wall_s=("wall_s", "sum"))
    lim = meta["limits_chosen"]
    print(f"{meta['scenario']}: {len(meta['limits'])} limits from {lim['low']:,.0f} to "
          f"{lim['high']:,.0f} samples/s ({meta['mode']} provisioning, {meta['engine']} engine), "
          f"{len(meta['schedulers'])} schedulers, {meta['wall_s']:.1f} s with {meta['jobs']} job(s)")
    with pd.option_context("display.width", 200):
        print(summary.to_string(formatters={"cheapest_usd": "{:,.6g}".format,
                                            "fastest": "{:,.0f}".format, "wall_s": "{:.2f}".format}))
    print(f"\nfolder: {out}  (tradeoff.csv, sweep.json, problem.json, plans/, figures/: "
          f"{len(figures)} files)")


def add_plot(p) -> None:
    p.add_argument("folder", help="a tradeoff folder, or a run folder with trace.json/result.json")


def cmd_plot(args) -> int:
    from heterps_sim.plots.redraw import redraw
    written = redraw(args.folder)  # PlotError: a UserFileError
    if args.json:
        print(dump([str(p) for p in written]))
    else:
        for path in written:
            print(path)
    return 0


def add_report(p) -> None:
    p.add_argument("--out", default="runs/report", help="output folder (default: runs/report)")
    p.add_argument("--scenarios", help="comma list of scenario files or names (default: all shipped)")
    p.add_argument("--points", type=int, default=10, help="limits per trade-off sweep (default 10)")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--model", choices=("default", "paper"), default=None,
                   help="analytic cost model for every scenario: default or paper (HeterPS's "
                        "Amdahl model); default: each scenario's costs.model")


def cmd_report(args) -> int:
    from heterps_sim.studies.report import write_report
    _check_counts(args)
    path = write_report(Path(args.out), scenarios=args.scenarios, points=args.points,
                        jobs=args.jobs, model=args.model)  # ReportError: a UserFileError
    if args.json:
        print(dump({"report": str(path)}))
    else:
        print(f"report written to {path}", file=sys.stdout)
    return 0


HANDLERS = {"tradeoff": (add_tradeoff, cmd_tradeoff), "plot": (add_plot, cmd_plot),
            "report": (add_report, cmd_report)}
"""Command name -> (add its arguments to a parser, run it with the parsed args)."""
