"""A policy checkpoint named by a user (`train-rl --init`, `schedule --set checkpoint=`),
checked before it is used: one line naming the flag and the problem, never a traceback, and a
crafted pickle is refused by torch's weights-only loader before anything in it runs."""

from __future__ import annotations

from heterps_sim.core.files import UserFileError

MAX_CHECKPOINT_BYTES = 256 * 2**20
"""The largest policy checkpoint read (the shipped one is well under 1 MiB)."""


def check_policy_checkpoint(path: str, trainer, flag: str = "checkpoint") -> None:
    """Raise UserFileError unless `path` is a policy checkpoint `trainer.load_checkpoint`
    reads: at most MAX_CHECKPOINT_BYTES, loaded with torch's weights-only unpickler (a crafted
    pickle names a function; it is refused, never called), of the trainer's format."""
    import os
    try:
        size = os.stat(path).st_size
    except OSError as exc:
        raise UserFileError(f"{flag} {path}: cannot read ({exc.strerror})") from None
    if os.path.isdir(path):
        raise UserFileError(f"{flag} {path}: is a folder, expected a checkpoint file")
    if size > MAX_CHECKPOINT_BYTES:
        raise UserFileError(f"{flag} {path}: larger than the {MAX_CHECKPOINT_BYTES // 2**20} "
                            "MiB a policy checkpoint may be")
    import pickle
    import warnings
    try:
        with warnings.catch_warnings():  # torch's warnings would add lines to the one
            warnings.simplefilter("ignore")
            trainer.load_checkpoint(path)  # torch.load(weights_only=True) inside
    except pickle.UnpicklingError:
        raise UserFileError(f"{flag} {path}: refused: it pickles objects other than tensors and "
                            "plain data (torch's weights-only loader stopped it; nothing in it "
                            "was run)") from None
    except Exception as exc:  # noqa: BLE001 - any failure to load is "not a checkpoint"
        why = " ".join(str(exc).split())[:160]
        raise UserFileError(f"{flag} {path}: not a {trainer.CHECKPOINT_FORMAT} checkpoint "
                            f"({type(exc).__name__}: {why})") from None
