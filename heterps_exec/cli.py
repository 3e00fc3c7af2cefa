"""`heterps-exec`: run a heterps plan for real with torch.distributed (in progress).

The execution engine (run, profile, validate, ps-bench) is being built; this entry point
only documents what is coming, so installs and scripts can already depend on its name.
"""

from __future__ import annotations

import argparse
import sys

PLANNED = {
    "run": "launch PLAN.json through torchrun (pipeline + data parallel, tiered PS)",
    "profile": "measure per-layer times on the devices at hand -> traces/profiles/",
    "validate": "predicted vs measured throughput over many plans",
    "ps-bench": "parameter-server pull/push throughput and tier hit rates",
}


def main(argv: list[str] | None = None) -> int:
    epilog = "commands (not yet available in this version):\n" + "\n".join(
        f"  {name:10s} {text}" for name, text in PLANNED.items())
    ap = argparse.ArgumentParser(prog="heterps-exec", description=__doc__, epilog=epilog,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", nargs="?", choices=sorted(PLANNED))
    args = ap.parse_args(argv)
    if args.command is None:
        ap.print_help()
        return 0
    print(f"heterps-exec {args.command}: not available in this version yet", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
