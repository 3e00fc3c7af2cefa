"""`heterps-exec`: run a heterps plan for real with torch.distributed.

Each command lives in its own module (`cli/run.py`, `cli/ps_bench.py`, ...) exposing
`add_arguments(parser)` and `run(args) -> int`; this file only dispatches, so importing it
never imports torch. Bad input prints one line naming the file, field and problem, exit 2.
"""

from __future__ import annotations

import argparse
import importlib

from heterps_sim.core.files import EXIT_BAD_INPUT, UserFileError, run_command
from heterps_sim.core.flags import OneLineParser, parse_or_report

COMMANDS = {
    # name: (module, one-line help)
    "run": ("heterps_exec.cli.run",
            "launch PLAN.json through torchrun (pipeline + data parallel) and measure it"),
    "profile": ("heterps_exec.cli.profile",
                "measure per-layer times and gloo link speed -> traces/profiles/"),
    "validate": ("heterps_exec.cli.validate",
                 "predicted (analytic, simulator) vs measured throughput over many plans"),
    "ps-bench": ("heterps_exec.cli.ps_bench",
                 "parameter-server pull/push throughput and tier hit rates"),
}
"""Every command's module is imported to build the parser: none imports torch at its top."""


class ExecCliError(UserFileError):
    """Bad input: str() is one line naming the file, field and problem; exit 2."""


def _parser(commands: dict[str, tuple[str, str]]) -> argparse.ArgumentParser:
    ap = OneLineParser(prog="heterps-exec", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_) in commands.items():
        mod = importlib.import_module(module)
        p = sub.add_parser(name, help=help_, description=(mod.__doc__ or help_).strip(),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(p)
        p.add_argument("--quiet", action="store_true", help="no progress lines or bars on "
                       "stderr (shown only on a terminal, or with HETERPS_PROGRESS=1)")
        p.set_defaults(_module=mod)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = _parser(COMMANDS)
    args = parse_or_report(ap, argv)
    if args is None:
        return EXIT_BAD_INPUT
    if args.command is None:
        ap.print_help()
        return 0
    from heterps_sim.util import progress
    with progress.showing(False if args.quiet else None):
        return run_command("heterps-exec", args.command, lambda: args._module.run(args))

