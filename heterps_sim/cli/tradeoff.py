"""The trade-off commands: `tradeoff` (sweep + figures), `plot` (redraw from files), `report`.

Kept apart from cli/__init__.py so that file stays a list of commands; the folder a sweep writes is
described in studies/sweep_files.py.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path


def add_commands(add) -> None:
    """Register the three commands with cli/__init__.py's `add(name, func, help, example)`."""
    p = add("tradeoff", cmd_tradeoff, "sweep the throughput limit: cost, plans and figures per "
            "scheduler", "heterps-sim tradeoff scenarios/ctr-dnn-64types.yaml --points 50 --jobs 2")
    p.add_argument("input", nargs="?", help="scenario YAML or problem JSON (default: built-in)")
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
    p = add("plot", cmd_plot, "redraw the figures of a tradeoff folder or a run folder from its "
            "files", "heterps-sim plot runs/tradeoff-ctr-dnn-64types-20261122-001500")
    p.add_argument("folder", help="a tradeoff folder, or a run folder with trace.json/result.json")
    p = add("report", cmd_report, "Markdown report with figures for the shipped scenarios",
            "heterps-sim report --scenarios dlrm-64types,2emb-aws --out runs/report")
    p.add_argument("--out", default="runs/report", help="output folder (default: runs/report)")
    p.add_argument("--scenarios", help="comma list of scenario files or names (default: all shipped)")
    p.add_argument("--points", type=int, default=10, help="limits per trade-off sweep (default 10)")
    p.add_argument("--jobs", type=int, default=1)


def _fail(message: str):
    from heterps_sim.cli import CliError
    raise CliError(message)


def _dump(data) -> str:
    return json.dumps(data, indent=1, default=str) + "\n"


def cmd_tradeoff(args) -> int:
    from heterps_sim.cli import _load
    from heterps_sim.studies.sweep import SweepError
    if args.jobs < 1:
        _fail("--jobs: expected at least 1")
    loaded = _load(args.input)
    try:
        spec, limits_how = _spec(args, loaded.problem)
    except SweepError as exc:
        _fail(str(exc))
    from heterps_sim.studies.sweep import run_sweep
    from heterps_sim.studies.sweep_files import sweep_meta, write_sweep
    result = run_sweep(loaded.problem, spec, jobs=args.jobs, progress=not args.json)
    label = loaded.problem.name or "problem"
    out = Path(args.out) if args.out else Path("runs") / f"tradeoff-{label}-{datetime.now():%Y%m%d-%H%M%S}"
    meta = sweep_meta(loaded, spec, result, limits_how, out, args.jobs)
    figures = write_sweep(out, loaded, result, meta)
    if args.json:
        print(_dump({"folder": str(out), **meta, "figures": [str(p) for p in figures]}))
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
        from heterps_sim.cli.des import EffectsError, parse_effects
        try:
            effects = tuple(sorted(parse_effects(args.effects)))
        except EffectsError as exc:
            _fail(str(exc))
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


def write_run_trace(problem, plan, path: Path, seed: int, write) -> None:
    """A run folder's trace.json: the plan simulated with the effects off (des defaults)."""
    from heterps_sim.core.trace import chrome_trace
    from heterps_sim.des import simulate
    run = simulate(problem, plan, seed=seed)
    meta = {"scenario": problem.name, "plan": plan.to_json_dict(), "seed": seed,
            "effects": "none (heterps-sim evaluate --engine des --effects ... --trace for more)"}
    write(path, json.dumps(chrome_trace(run.spans, meta)) + "\n")


def cmd_plot(args) -> int:
    from heterps_sim.plots.redraw import PlotError, redraw
    try:
        written = redraw(args.folder)
    except PlotError as exc:
        _fail(str(exc))
    if args.json:
        print(_dump([str(p) for p in written]))
    else:
        for path in written:
            print(path)
    return 0


def cmd_report(args) -> int:
    from heterps_sim.studies.report import ReportError, write_report
    if args.jobs < 1 or args.points < 1:
        _fail(f"--{'jobs' if args.jobs < 1 else 'points'}: expected at least 1")
    try:
        path = write_report(Path(args.out), scenarios=args.scenarios, points=args.points,
                            jobs=args.jobs, progress=not args.json)
    except ReportError as exc:
        _fail(str(exc))
    if args.json:
        print(_dump({"report": str(path)}))
    else:
        print(f"report written to {path}", file=sys.stdout)
    return 0
