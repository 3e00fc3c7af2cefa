"""`train-rl`: train an RL scheduler's policy on one or many problems.

The training scripts own their flags (generated from their pydantic `Args`); `--scheduler`
picks which: rl-paper (schedulers/rl/paper/train.py, the default) or rl
(schedulers/rl/stagewise/train.py). `--quiet`, as on every other command, turns the progress
bars on stderr off. Torch is imported only when a trainer runs.
"""

from __future__ import annotations

from heterps_sim.core.files import UserFileError
from heterps_sim.schedulers.rl.checkpoint_file import check_policy_checkpoint

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

    from heterps_sim.util import progress
    rest, which = split_scheduler(argv)
    rest, quiet = split_quiet(rest)
    if which not in TRAINERS:
        raise UserFileError(f"--scheduler: expected rl or rl-paper, got {which!r}")
    trainer = importlib.import_module(TRAINERS[which])
    if not {"-h", "--help"} & set(rest):
        check_files(trainer, rest)  # minutes of training must not end in an unwritable --out
    with progress.showing(False if quiet else None):
        return trainer.main(rest)


"""Largest policy checkpoint read (a trained policy is a few MB)."""


def check_files(trainer, argv: list[str]) -> None:
    """What the trainer's command line `argv` names, checked before training starts: the seed,
    --init (a checkpoint of this trainer, read as data only), --out and the CSV log beside it
    (writable files). Bad ones raise UserFileError, one line naming the flag."""
    from pathlib import Path

    from heterps_sim.core.limits import seed_problem
    from heterps_sim.core.outputs import check_target
    ns = trainer.parser().parse_args(argv)  # argparse's own errors exit 2 as the trainer's would
    bad_seed = seed_problem(ns.seed)
    if bad_seed:
        raise UserFileError(bad_seed)
    if ns.init and ns.init != "shipped":
        check_policy_checkpoint(ns.init, trainer, "--init")
    for flag, path in (("--out", lambda: ns.out),  # the log's default is the --out's .csv
                       ("--log", lambda: getattr(ns, "log", "") or Path(ns.out).with_suffix(".csv"))):
        try:
            check_target(path())
        except UserFileError as exc:
            raise UserFileError(f"{flag}: {exc}") from None
    for path in (ns.out, getattr(ns, "log", "")):  # checked: make their folders, as other
        if path:                                   # outputs do (the CSV log opens in place)
            Path(path).parent.mkdir(parents=True, exist_ok=True)
