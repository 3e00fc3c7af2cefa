"""Predicted vs measured throughput over many plans: how far to trust the model here.

examples:
  heterps-exec validate --plans 20 --scenario scenarios/exec-tiny.yaml
  heterps-exec validate --plans 5 --profile traces/profiles/vm-cpu-tiny-ctr.csv \
      --links traces/profiles/vm-links.json --json

Draws N diverse plans (stage counts 1-4, replica counts up to --max-ranks ranks, gpipe and
1f1b, microbatches, the scenario's types emulated at their relative speeds unless --binding
says otherwise), predicts each with the analytic model and the simulator on a problem
calibrated to this machine (per-layer fits of the profile, gloo latency and bandwidth, the
host's cores, shared as --core-sharing says), runs each with the engine, and writes
OUT/validate.csv, OUT/report.json and OUT/scatter.png (predicted vs measured, both
predictors). Without --profile / --links it
measures them first (two or three minutes). Before the plans it runs the model whole on one
rank at 1 and 8 microbatches (the runtime's own overhead); with --message-cpu calibrate also
on two ranks cut at each boundary the plans cut, under each schedule they use (what one
boundary message costs the CPU there as the engine sends it, charged instead of the links'
gloo figure). --repeats R runs every plan R times, in R
rounds over all plans, and keeps each plan's run of median throughput (a noisy host).
--json prints {"num_plans", "mape_des", "mape_analytic", "kendall_tau_des",
"kendall_tau_analytic", "plans": [...]} and more (at-run-speed figures, overheads).
Exit 2: bad input (nothing run); 1: a plan's run failed (one line naming its log).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plans", type=int, default=20)
    p.add_argument("--scenario", default="scenarios/exec-tiny.yaml", metavar="INPUT")
    p.add_argument("--binding", default="", metavar="FILE",
                   help="default: every type emulated on the CPU at its relative peak speed")
    p.add_argument("--profile", default="", metavar="CSV", help="heterps-exec profile output")
    p.add_argument("--links", default="", metavar="JSON", help="heterps-exec profile links")
    p.add_argument("--steps", type=int, default=40, help="measured steps per plan")
    p.add_argument("--repeats", type=int, default=1,
                   help="runs per plan, in rounds over the plans; the median run counts")
    p.add_argument("--message-cpu", choices=("links", "calibrate"), default="links",
                   help="what a boundary message costs the CPU: the links file's gloo figure "
                        "(links), or measured first by two-rank pipeline runs cut at each "
                        "boundary the plans cut, per schedule (calibrate)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-ranks", type=int, default=6)
    p.add_argument("--core-sharing", choices=("fifo", "fair"), default="fair",
                   help="how the simulator shares this host's cores among the ranks: all "
                        "running computations share them at cores / running speed, as the "
                        "OS does (fair, the default), or a waiting computation gets the next "
                        "free core (fifo)")
    p.add_argument("--out", default="runs/validate", metavar="DIR")
    p.add_argument("--json", action="store_true")


def _check_sizes(args) -> None:
    """Bounds and the output folder, before minutes of profiling and runs."""
    from heterps_exec.cli import ExecCliError
    from heterps_sim.core.outputs import OutputError, check_folder
    checks = [(2 <= args.plans <= MAX_PLANS, f"--plans: expected 2..{MAX_PLANS}, got {args.plans}"),
              (1 <= args.repeats <= MAX_REPEATS,
               f"--repeats: expected 1..{MAX_REPEATS}, got {args.repeats}"),
              (1 <= args.steps <= MAX_STEPS, f"--steps: expected 1..{MAX_STEPS}, got {args.steps}"),
              (1 <= args.max_ranks <= MAX_RANKS,
               f"--max-ranks: expected 1..{MAX_RANKS} ranks, got {args.max_ranks}")]
    from heterps_sim.core.limits import seed_problem
    checks.append((seed_problem(args.seed) is None, seed_problem(args.seed)))
    for ok, message in checks:
        if not ok:
            raise ExecCliError(message)
    try:  # an earlier validation's folder is cleared just before the runs; others refused
        check_folder(args.out, OWNED)
    except OutputError as exc:
        raise ExecCliError(f"--out: {exc}") from None


MAX_PLANS, MAX_REPEATS, MAX_STEPS, MAX_RANKS = 1000, 100, 100_000, 64
OWNED = ("validate.csv", "report.json", "scatter.png", "plans", "run*")
"""What a validation folder holds (an existing --out is cleared of these names only)."""


def run(args) -> int:
    from heterps_exec.cli import ExecCliError
    if args.plans < 2:
        raise ExecCliError("--plans: at least 2 (a ranking needs two plans)")
    if args.repeats < 1:
        raise ExecCliError(f"--repeats: at least 1, got {args.repeats}")
    _check_sizes(args)
    from heterps_sim.inputs.load import InputError, load_input
    try:
        loaded = load_input(args.scenario)
    except InputError as exc:
        raise ExecCliError(str(exc)) from None
    if loaded.scenario is None:
        raise ExecCliError(f"{args.scenario}: validate needs a scenario YAML naming a zoo model")
    from heterps_exec.calibration.inputs import read_links, read_profile_rows
    links = read_links(args.links) if args.links else None  # checked before any measuring
    import torch

    from heterps_exec.calibration.links import profile_links
    from heterps_exec.calibration.profiler import profile_layers
    from heterps_exec.calibration.validate import ValidateRequest, validate
    from heterps_sim.inputs.model_source import section_graph
    from heterps_sim.util import progress  # on stderr, only on a terminal (--quiet: never)
    model = loaded.scenario.model
    user = None
    if getattr(model, "module", None):  # a PyTorch module: the chain heterps derived from it
        from heterps_exec.calibration.user_profiler import profile_user_layers, user_target
        user = user_target(model, str(args.scenario))
    if args.profile:
        rows = read_profile_rows(args.profile, user.name if user else model.name)
    else:
        torch.set_num_threads(1)
        batches = (8, 32, 64, 128, 256)
        rows = (profile_user_layers(user, batches=batches) if user else
                profile_layers(section_graph(model, str(args.scenario)), batches=batches))
    if links is None:
        links = profile_links(max(args.max_ranks, 2))
    from heterps_sim.core.outputs import prepare_folder
    prepare_folder(args.out, OWNED)  # checked above; cleared of an earlier run's files now
    bar = progress.bar(total=args.plans * args.repeats, desc="runs", unit="run")
    from heterps_exec.launch.torchrun import RunFailed
    try:
        report = validate(ValidateRequest(scenario=args.scenario, num_plans=args.plans,
                                          binding=args.binding, steps=args.steps,
                                          seed=args.seed, max_ranks=args.max_ranks,
                                          out_dir=args.out, repeats=args.repeats,
                                          profile_rows=rows, links=links,
                                          core_sharing=args.core_sharing,
                                          calibrate_messages=args.message_cpu == "calibrate"),
                          progress=lambda n, row: bar.update(1))
    except RunFailed as exc:  # the input was fine, a run was not: exit 1, as `run`'s
        bar.close()
        print(f"heterps-exec validate: {exc}", file=sys.stderr)
        return 1
    bar.close()
    _write(report, Path(args.out))
    if args.json:
        print(json.dumps(report, indent=1, default=float))
    else:
        print(_table(report))
    return 0


def _write(report: dict, out: Path) -> None:
    import pandas as pd

    from heterps_exec.calibration.figure import scatter
    from heterps_sim.core.outputs import atomic_write, mark_complete
    frame = pd.json_normalize(report["plans"])
    atomic_write(out / "validate.csv", frame.to_csv(index=False))
    atomic_write(out / "report.json", json.dumps(report, indent=1, default=float) + "\n")
    scatter(report, out / "scatter.png")
    mark_complete(out, "validate")  # last


def _table(report: dict) -> str:
    lines = [f"{'plan':>4} {'replicas':>9} {'sched':>5} {'m':>2} {'measured/s':>11} "
             f"{'DES/s':>9} {'err %':>7} {'analytic/s':>11} {'err %':>7} {'speed':>6} "
             f"{'DES@speed':>10} {'err %':>7}"]
    for r in report["plans"]:
        lines.append(f"{r['plan']:>4} {r['replicas']:>9} {r['schedule']:>5} "
                     f"{r['microbatches']:>2} {r['measured']:>11,.0f} {r['des']:>9,.0f} "
                     f"{100 * (r['des'] / r['measured'] - 1):>+7.1f} {r['analytic']:>11,.0f} "
                     f"{100 * (r['analytic'] / r['measured'] - 1):>+7.1f} "
                     f"{r['run_speed']:>6.2f} {r['des_at_run_speed']:>10,.0f} "
                     f"{100 * (r['des_at_run_speed'] / r['measured'] - 1):>+7.1f}")
    lines.append(f"MAPE: DES {report['mape_des']:.1f}%, analytic {report['mape_analytic']:.1f}%; "
                 f"Kendall tau: DES {report['kendall_tau_des']:.2f}, analytic "
                 f"{report['kendall_tau_analytic']:.2f} over {report['num_plans']} plans")
    if report["host_load_before"] > 0.5:
        lines.append(f"note: the host's 1-minute load average was "
                     f"{report['host_load_before']:.1f} ({report['host_cores']} cores) before "
                     f"the runs (anything run in the last minute counts); other work slows the "
                     f"runs and the model does not know it")
    if report.get("allreduce_note"):
        lines.append(f"note: {report['allreduce_note']}")
    lines.append(f"the simulator's ranks share this host's {report['host_cores']} cores "
                 f"{report['core_sharing']} (--core-sharing)")
    lines.append(f"runtime overhead (idle of one-rank calibration runs): "
                 f"{report['step_overhead_s'] * 1e3:.2f} ms per step + "
                 f"{report['microbatch_overhead_s'] * 1e3:.3f} ms per microbatch")
    for schedule, cpu in sorted((report.get("message_cpu") or {}).items()):
        lines.append(f"CPU per boundary message as the engine sends it, {schedule} "
                     "(two-rank calibration runs; cut after: upstream / downstream rank): "
                     + ", ".join(f"{layer} {up * 1e6:.0f} / {down * 1e6:.0f} us"
                                 for layer, (up, down) in cpu.get("per_cut_s", {}).items()))
    lines.append(f"at each run's measured compute speed: MAPE DES "
                 f"{report['mape_des_at_run_speed']:.1f}%, analytic "
                 f"{report['mape_analytic_at_run_speed']:.1f}%; Kendall tau DES "
                 f"{report['kendall_tau_des_at_run_speed']:.2f}, analytic "
                 f"{report['kendall_tau_analytic_at_run_speed']:.2f}")
    parts = [f"{c[:-2]} {e['mean_signed_pct']:+.1f}% (|{e['mean_abs_pct']:.1f}%|)"
             for c, e in report["component_errors_des"].items()]
    lines.append("DES step-time error by component, mean share of the measured step: "
                 + ", ".join(parts))
    return "\n".join(lines)
