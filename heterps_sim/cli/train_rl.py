"""`train-rl`: train an RL scheduler's policy on one or many problems.

The training scripts own their flags (generated from their pydantic `Args`); `--scheduler`
picks which: rl-paper (schedulers/rl/paper/train.py, the default) or rl
(schedulers/rl/stagewise/train.py). `--quiet`, as on every other command, turns the progress
bars on stderr off. Torch is imported only when a trainer runs.
"""

from __future__ import annotations

from heterps_sim.core.files import UserFileError

TRAINERS = {"rl-paper": "heterps_sim.schedulers.rl.paper.train",
            "rl": "heterps_sim.schedulers.rl.stagewise.train"}


def split_scheduler(argv: list[str]) -> tuple[list[str], str]:
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


def split_quiet(argv: list[str]) -> tuple[list[str], bool]:
    """(argv without --quiet, whether it was there)."""
    rest = [a for a in argv if a != "--quiet"]
    return rest, len(rest) != len(argv)


def main(argv: list[str]) -> int:
    """Run the chosen trainer's `main` on the rest of the command line; its exit code."""
    import importlib

    from heterps_sim.core import progress
    rest, which = split_scheduler(argv)
    rest, quiet = split_quiet(rest)
    if which not in TRAINERS:
        raise UserFileError(f"--scheduler: expected rl or rl-paper, got {which!r}")
    with progress.showing(False if quiet else None):
        return importlib.import_module(TRAINERS[which]).main(rest)
