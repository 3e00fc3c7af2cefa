"""The command-line flags both CLIs share the rule for: a bad flag is one line, exit 2.

argparse prints a usage block and then the error; `OneLineParser` raises the error as bad
input instead, printed as one line naming the command and the flag (`heterps-sim evaluate:
argument --ps-zipf: expected a finite number in (0, 100], got nan (see heterps-sim evaluate
--help)`). `number(...)` is the `type=` of every numeric flag:
it refuses NaN, infinity and values outside the flag's range while the line is parsed, before
any work starts, whether or not the command goes on to use the flag (a --ps-zipf given to the
analytic engine is still a typo worth a line).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable

from heterps_sim.core.files import UserFileError


class FlagError(UserFileError):
    """A bad command line: str() is one line naming the flag; `prog` is the command
    ("heterps-sim evaluate") the line is printed after."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(f"{' '.join(message.split())} (see {prog} --help)")
        self.prog = prog


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise FlagError instead of printing a usage block and
    exiting, so the CLI prints them as every other bad input: one line, exit 2 (its subparsers
    are of the same class: argparse makes them with the parent's class)."""

    def error(self, message: str):
        raise FlagError(self.prog, message)


def parse_or_report(parser: argparse.ArgumentParser, argv: list[str] | None):
    """`parser.parse_args(argv)`, or None after printing its error as one line on stderr."""
    try:
        return parser.parse_args(argv)
    except FlagError as exc:
        print(f"{exc.prog}: {exc}", file=sys.stderr)
        return None


def number(kind: type = float, low: float | None = None, high: float | None = None, *,
           above: bool = False, note: str = "") -> Callable[[str], int | float]:
    """An argparse `type=`: text -> `kind` (int or float) within [low, high] (with `above`,
    strictly above `low`); NaN and infinity are refused. `note` follows the range in the
    message, e.g. "0: none"."""
    if kind is int:
        what = "an integer"
    else:
        what = "a finite number"
    lo = "" if low is None else (f"> {low:g}" if above else f">= {low:g}")
    if low is not None and high is not None:
        span = f" in {'(' if above else '['}{low:g}, {high:g}]"
    elif high is not None:
        span = f" <= {high:g}"
    else:
        span = f" {lo}" if lo else ""
    expected = f"expected {what}{span}" + (f" ({note})" if note else "")

    def parse(text: str):
        try:
            value = int(text) if kind is int else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{expected}, got {text!r}") from None
        if (not math.isfinite(value) or (low is not None and (value <= low if above
                                                             else value < low))
                or (high is not None and value > high)):
            raise argparse.ArgumentTypeError(f"{expected}, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse
