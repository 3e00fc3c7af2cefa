"""The one error of a user model's capture, and the words its one line is made of.

Every failure to import, build, capture, measure or train a user's module is a CaptureError
(a core.files.UserFileError: the CLI prints it as one line and exits 2) naming the file, the
field (model.module, model.kwargs, model.inputs, model.loss, ...) and the way out.
"""

from __future__ import annotations

from heterps_sim.core.files import UserFileError


class CaptureError(UserFileError):
    """A user model that cannot be imported, built, captured or trained: one line."""


def exited(exc: SystemExit) -> str:
    """What a user's code that called sys.exit() (or raised SystemExit) is told: the command
    goes on to say so, instead of ending with that code and nothing produced."""
    return (f"called sys.exit({exc.code!r}); model code must return or raise, not end the "
            "process")


def first_line(exc: BaseException) -> str:
    """The exception's first non-blank line, at most 300 characters (its type if none)."""
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()[:300]
    return type(exc).__name__
