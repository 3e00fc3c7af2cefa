"""Score saved `heterps-exec validate` runs again, with whichever heterps code is imported.

`validate` measures plans on this machine and predicts them; the machine's speed drifts 2x
from minute to minute, so two validate runs a few days apart differ by more than any code
change could. This script takes the measurements of one run (its folder: every run's
ranks.json) and predicts them again, without launching anything (the engine's launch is
replaced by reading the saved folder), so two code versions are compared on the SAME
measurements: put another version first on the path, e.g. an export of an older commit,

    git archive COMMIT heterps_sim heterps_exec traces scenarios | tar -x -C /tmp/old
    cd /tmp/old && PYTHONPATH=/tmp/old python /path/to/bench_validate_rescore.py RUN_DIR 6 2

and compare its printout with the current code's. RUN_DIR is copied first (a version may
write into its run folders); the profile and links are the committed ones, read from the
current directory.

Usage: python benchmarks/bench_validate_rescore.py RUN_DIR NUM_PLANS MAX_RANKS
       [--repeats R] [--core-sharing fifo|fair] [--steps S] [--links FILE]
       [--message-cpu auto|links|calibrate]

(the run's own --repeats, --steps and --seed 0; --core-sharing scores the same runs under
another rule for the host's cores; --links the links JSON the run used, when not the
committed one. A folder holding the two-rank pipeline calibration runs of `--message-cpu
calibrate` is scored with them (auto, calibrate), or with the links' gloo figure (links).)
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import tempfile
from pathlib import Path

SCENARIO = "scenarios/exec-tiny.yaml"
PROFILE = "traces/profiles/vm-cpu-tiny-ctr.csv"
LINKS = "traces/profiles/vm-links.json"


class _Saved:
    """What launch returns for a run whose measurements are already in its folder."""

    returncode = 0
    log = ""


def _modules():
    """(cli module, validate module) of the imported version (the layout moved on 11-24)."""
    try:
        return (importlib.import_module("heterps_exec.cli.validate"),
                importlib.import_module("heterps_exec.calibration.validate"))
    except ModuleNotFoundError:
        return (importlib.import_module("heterps_exec.cli_validate"),
                importlib.import_module("heterps_exec.validate"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("plans", type=int)
    ap.add_argument("max_ranks", type=int)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--core-sharing", choices=("fifo", "fair"), default=None)
    ap.add_argument("--links", default=LINKS)
    ap.add_argument("--message-cpu", choices=("auto", "links", "calibrate"), default="auto")
    args = ap.parse_args()
    run_dir, plans, max_ranks = args.run_dir, args.plans, args.max_ranks
    extra = {"repeats": args.repeats} if args.repeats != 1 else {}
    if args.steps is not None:
        extra["steps"] = args.steps
    if args.core_sharing is not None:  # (versions before 11-28 have only the FIFO cores)
        extra["core_sharing"] = args.core_sharing
    cli, validate = _modules()
    try:  # versions with validate --message-cpu calibrate: its runs, when the folder has them
        from heterps_exec.calibration import message_cost
        if message_cost.saved_in(run_dir) and args.message_cpu != "links":
            extra["calibrate_messages"] = True
        elif args.message_cpu == "calibrate":
            raise SystemExit(f"{run_dir}: holds no calibration runs of this version")
    except ModuleNotFoundError:
        pass
    try:  # the launcher's torchrun half (launch/ became a folder on 11-27)
        launch = importlib.import_module("heterps_exec.launch.torchrun")
    except ModuleNotFoundError:
        launch = importlib.import_module("heterps_exec.launch")
    launch.launch = lambda spec, options=None: _Saved()
    try:
        from heterps_sim.inputs.load import load_input
    except ModuleNotFoundError:  # before 11-24
        from heterps_sim.inputs import load_input
    model = load_input(SCENARIO).scenario.model.name
    work = Path(tempfile.mkdtemp(prefix="rescore-")) / "runs"
    shutil.copytree(run_dir, work)
    try:  # the readers of the version imported (moved out of the CLI on 11-27)
        from heterps_exec.calibration.inputs import read_links, read_profile_rows
        rows, links = read_profile_rows(PROFILE, model), read_links(args.links)
    except ModuleNotFoundError:
        rows, links = cli._profile_rows(PROFILE, model), json.loads(Path(args.links).read_text())
    report = validate.validate(validate.ValidateRequest(
        scenario=SCENARIO, num_plans=plans, max_ranks=max_ranks, out_dir=str(work),
        profile_rows=rows, links=links, **extra))
    import heterps_exec
    print(f"# code: {Path(heterps_exec.__file__).parent.parent}")
    for key in ("mape_des", "kendall_tau_des", "mape_des_at_run_speed",
                "kendall_tau_des_at_run_speed", "mape_analytic", "mape_analytic_at_run_speed"):
        print(f"{key:32} {report[key]:.6g}")
    for row in report["plans"]:
        print(f"plan {row['plan']}: {row['replicas']:>5} {row['schedule']:5} m={row['microbatches']}"
              f"  measured {row['measured']:10,.0f}  des {row['des']:10,.0f}  at run speed "
              f"{row['des_at_run_speed']:10,.0f}  (speed {row['run_speed']:.3f})")
    shutil.rmtree(work.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
