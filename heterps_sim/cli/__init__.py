"""`heterps-sim`: plan where each layer trains on heterogeneous rented hardware.

Every command takes a scenario YAML, a shipped scenario's name (`heterps-sim scenarios`) or a
problem JSON (none: the built-in default scenario);
`--json` prints one JSON document to stdout. Bad input prints one line naming the file, the
field and the problem, and exits 2. Exit 1 means the input was fine but no plan meets the
throughput limit.
"""

# Each command group lives in its own module (cli/inputs.py, cli/schedule.py, cli/des.py,
# cli/tradeoff.py, cli/train_rl.py; shared helpers in cli/common.py) whose HANDLERS map a
# command to (add its arguments, run it); this file only dispatches, and importing it imports
# none of them. Bad input is a core.files.UserFileError, caught once, in `main`.

from __future__ import annotations

import argparse
import importlib
import sys

from heterps_sim.core.files import EXIT_BAD_INPUT, run_command
from heterps_sim.core.flags import OneLineParser, parse_or_report

EXIT_INFEASIBLE = 1

COMMANDS = {
    # name: (module, one-line help, example)
    "train-rl": ("heterps_sim.cli.train_rl",
                 "train an RL scheduler's policy on one or many problems: --scheduler rl-paper "
                 "(default) or rl (see heterps-sim train-rl [--scheduler rl] --help)", ""),
    "catalog": ("heterps_sim.cli.inputs", "list the resource types",
                "heterps-sim catalog --kind gpu"),
    "scenarios": ("heterps_sim.cli.inputs", "list the shipped scenarios (a name works "
                  "wherever a scenario path does)", "heterps-sim scenarios"),
    "check": ("heterps_sim.cli.inputs", "validate scenario files",
              "heterps-sim check scenarios/*.yaml"),
    "problem": ("heterps_sim.cli.inputs", "export the numeric problem",
                "heterps-sim problem scenarios/dlrm-64types.yaml --json > problem.json"),
    "schedule": ("heterps_sim.cli.schedule", "choose a plan",
                 "heterps-sim schedule scenarios/dlrm-64types.yaml --scheduler exact "
                 "--out plan.json"),
    "simulate": ("heterps_sim.cli.schedule", "schedule + evaluate, write a run folder",
                 "heterps-sim simulate scenarios/exec-tiny.yaml"),
    "compare": ("heterps_sim.cli.schedule",
                "every scheduler on one problem, with its gap to the optimum",
                "heterps-sim compare scenarios/dlrm-64types.yaml --budget 20000 "
                "--out compare.csv"),
    "evaluate": ("heterps_sim.cli.schedule", "cost a given plan",
                 "heterps-sim evaluate scenarios/exec-tiny.yaml "
                 "scenarios/plans/exec-tiny-pipeline.json --mode exact"),
    "convert-plan": ("heterps_sim.cli.schedule", "rewrite a plan.json in the current format "
                     "(format 2: mixed-type stages)",
                     "heterps-sim convert-plan scenarios/plans/exec-tiny-pipeline.json -o plan.json"),
    "episodes": ("heterps_sim.cli.episodes",
                 "a plan over whole jobs with spot units: expected cost, how often it meets "
                 "the floor, beside on demand",
                 "heterps-sim episodes scenarios/exec-tiny.yaml --market "
                 "scenarios/markets/exec-tiny-spot.yaml"),
    "effects": ("heterps_sim.cli.des",
                "what the analytic model misses: each simulator effect alone",
                "heterps-sim effects scenarios/dlrm-64types.yaml --schedule 1f1b"),
    "tradeoff": ("heterps_sim.cli.tradeoff", "sweep the throughput limit: cost, plans and "
                 "figures per scheduler",
                 "heterps-sim tradeoff scenarios/ctr-dnn-64types.yaml --points 50 --jobs 2"),
    "plot": ("heterps_sim.cli.tradeoff", "redraw the figures of a tradeoff folder or a run "
             "folder from its files",
             "heterps-sim plot RUN_FOLDER  (a folder tradeoff or simulate printed)"),
    "report": ("heterps_sim.cli.tradeoff", "Markdown report with figures for the shipped "
               "scenarios", "heterps-sim report --scenarios dlrm-64types,2emb-aws "
               "--out runs/report"),
}
"""Every command's module is imported to build the parser: none imports torch or simpy at its
top. Listed in the order `heterps-sim --help` shows them."""
OWN_FLAGS = ("train-rl",)
"""Commands whose module parses the rest of the line itself (`main(argv)`): the trainers own
their flags."""


def _parser(commands: dict[str, tuple[str, str, str]] = COMMANDS) -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    ap = OneLineParser(prog="heterps-sim", formatter_class=fmt, description=__doc__,
                                 epilog="example: heterps-sim simulate scenarios/dlrm-64types.yaml")
    sub = ap.add_subparsers(dest="command", required=True)
    for name, (module, help_, example) in commands.items():
        if name in OWN_FLAGS:
            sub.add_parser(name, help=help_, add_help=False)
            continue
        add_arguments, run = importlib.import_module(module).HANDLERS[name]
        p = sub.add_parser(name, help=help_, description=help_, epilog=f"example: {example}",
                           formatter_class=fmt)
        p.set_defaults(run=run)
        p.add_argument("--json", action="store_true", help="print one JSON document")
        p.add_argument("--quiet", action="store_true", help="no progress lines or bars on "
                       "stderr (shown only on a terminal, or with HETERPS_PROGRESS=1)")
        add_arguments(p)
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] and argv[0] in OWN_FLAGS:
        command, module = argv[0], importlib.import_module(COMMANDS[argv[0]][0])
        return run_command("heterps-sim", command, lambda: module.main(argv[1:]))
    args = parse_or_report(_parser(), argv)
    if args is None:
        return EXIT_BAD_INPUT
    from heterps_sim.util import progress
    with progress.showing(False if args.quiet else None):
        return run_command("heterps-sim", args.command, lambda: _checked(args).run(args))


def _checked(args):
    """Flags every command shares, checked before any work: a seed is 0..2^32-1."""
    seed = getattr(args, "seed", None)
    if seed is not None:
        from heterps_sim.core.files import UserFileError
        from heterps_sim.core.limits import seed_problem
        problem = seed_problem(seed)
        if problem:
            raise UserFileError(problem)
    return args

