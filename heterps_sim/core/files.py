"""Reading the user's files with errors a person can act on.

Every failure is a `UserFileError` whose message is one line naming the file, the field and
the problem; the CLI prints it and exits 2.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import yaml
from pydantic import ValidationError


class UserFileError(ValueError):
    """Bad input; str() is one line naming the file, the field and the problem."""


def validation_message(source: str, exc: ValidationError) -> str:
    """All of a pydantic error's problems, each with its dotted path, on one line."""
    parts = [f"{'.'.join(str(x) for x in e['loc']) or '(top level)'}: {e['msg']}"
             for e in exc.errors()]
    return f"{source}: " + "; ".join(parts)


def read_text(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        raise UserFileError(f"{path}: no such file") from None
    except UnicodeDecodeError:
        raise UserFileError(f"{path}: not a text file (not UTF-8)") from None
    except OSError as exc:
        raise UserFileError(f"{path}: cannot read ({exc.strerror})") from None


def read_mapping(path: Path) -> dict:
    """A YAML or JSON file (by suffix) whose top level must be a mapping."""
    text = read_text(path)
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserFileError(f"{path}: malformed JSON at line {exc.lineno}, column "
                                f"{exc.colno}: {exc.msg}") from None
    else:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise UserFileError(f"{path}: malformed YAML{where}: "
                                f"{getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(data, dict):
        raise UserFileError(f"{path}: expected a mapping of fields at the top level")
    return data


def atomic_write(path: Path, text: str) -> None:
    """Write next to the target, fsync, then rename: a crash never leaves a half-written file
    (core.outputs.atomic_write, kept here for the callers that import it from this module)."""
    from heterps_sim.core.outputs import atomic_write as write
    write(path, text)


RUN_NAME_MAX = 80
"""Most characters of the label part of a run folder's name (file systems allow 255)."""


def run_folder_name(label: str) -> str:
    """A scenario name as one safe path component: letters, digits, '.', '_' and '-' kept,
    every other run of characters (a '/', a NUL, a space) one '-', no leading or trailing
    '.' or '-' (so never '.' or '..'), at most RUN_NAME_MAX characters, "run" when empty."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip(".-")[:RUN_NAME_MAX].strip(".-")
    return slug or "run"


def new_run_folder(label: str, parent: Path = Path("runs"), now: datetime | None = None) -> Path:
    """Create `parent/<label>-<YYYYmmdd-HHMMSS>` and return it. The folder is created here,
    exclusively (mkdir is atomic), so two runs started in the same second never share one:
    the later gets a `-2`, `-3`, ... suffix. The label is made path-safe (run_folder_name), so
    the folder is always directly under `parent`."""
    parent = Path(parent)
    base = f"{run_folder_name(label)}-{(now or datetime.now()):%Y%m%d-%H%M%S}"
    try:
        parent.mkdir(parents=True, exist_ok=True)
        for n in itertools.count(1):
            path = parent / (base if n == 1 else f"{base}-{n}")
            try:
                path.mkdir()
                return path
            except FileExistsError:
                continue
    except OSError as exc:
        raise UserFileError(f"{parent}: cannot create a run folder there "
                            f"({exc.strerror or exc})") from None
    raise AssertionError("unreachable")  # itertools.count never ends


EXIT_BAD_INPUT, EXIT_INTERRUPTED = 2, 130


def run_command(program: str, command: str, run: Callable[[], int | None]) -> int:
    """One command of `heterps-sim` or `heterps-exec` under the error policy both share: bad
    input (a UserFileError) is one line on stderr and exit 2; output piped into `head` and
    closed is not an error (exit 0); Ctrl-C says so and exits 130."""
    try:
        return int(run() or 0)
    except UserFileError as exc:
        one_line = " ".join(str(exc).split())  # parsers' messages may span lines
        print(f"{program} {command}: {one_line}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(f"{program} {command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
