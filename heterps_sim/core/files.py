"""Reading the user's files with errors a person can act on.

Every failure is a `UserFileError` whose message is one line naming the file, the field and
the problem; the CLI prints it and exits 2.
"""

from __future__ import annotations

import itertools
import json
import math
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


MAX_INPUT_BYTES = 32 * 2**20
"""Largest scenario, problem, plan or binding file read (a 64-type, 1,000-layer problem JSON
is a few MB)."""
MAX_YAML_NODES = 1_000_000
"""Most values a YAML document may hold once its aliases are expanded: an 800-byte "billion
laughs" document of nested aliases expands to billions and is refused before it is built."""
MAX_NESTING = 64
"""Deepest nesting of lists and mappings in an input file (a scenario nests 4-5 deep). YAML is
refused as it is composed, before PyYAML's recursive composer could reach Python's recursion
limit; JSON right after parsing, before any recursive check walks it."""


def read_text(path: Path, max_bytes: int = MAX_INPUT_BYTES) -> str:
    """A text file of at most `max_bytes` (read up to the limit, so /dev/zero cannot hang)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise UserFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserFileError(f"{path}: is a folder, expected a file") from None
    except OSError as exc:
        raise UserFileError(f"{path}: cannot read ({exc.strerror})") from None
    if len(raw) > max_bytes:
        raise UserFileError(f"{path}: larger than the {max_bytes // 2**20} MiB an input "
                            "file may be")
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise UserFileError(f"{path}: not a text file (not UTF-8)") from None


def _expanded_size(node, memo: dict, open_: set) -> int:
    """Values in `node` with every alias expanded (memoised per node, so linear in the text)."""
    key = id(node)
    if key in memo:
        return memo[key]
    if key in open_:
        raise ValueError("an alias refers to a value that contains it (a recursive document)")
    open_.add(key)
    if isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(child, memo, open_) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, memo, open_) + _expanded_size(v, memo, open_)
                       for k, v in node.value)
    else:
        size = 1
    open_.discard(key)
    memo[key] = size
    return size


class _TooDeep(Exception):
    pass


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader whose composer refuses nesting deeper than MAX_NESTING as it descends (the
    composer recurses once per level, several frames deep: a 1,000-deep document would hit
    Python's recursion limit before any check on the finished tree could run)."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        opens = self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent)
        self._depth += opens  # lists and mappings count, as nesting_depth counts them
        try:
            if self._depth > MAX_NESTING:
                raise _TooDeep
            return super().compose_node(parent, index)
        finally:
            self._depth -= opens


def _too_deep(source: str) -> UserFileError:
    return UserFileError(f"{source}: refused: lists and mappings nested more than {MAX_NESTING} "
                         "deep (the limit)")


def nesting_depth(data, stop: int = MAX_NESTING) -> int:
    """Depth of nested lists and dicts in `data` (a scalar: 0), counted without recursion and
    at most `stop` + 1 (enough to say it is too deep)."""
    deepest, level = 0, [data]
    while level and deepest <= stop:
        children = []
        for item in level:
            if isinstance(item, dict):
                children += item.values()
            elif isinstance(item, list | tuple):
                children += item
        if not any(isinstance(x, dict | list | tuple) for x in level):
            break
        deepest += 1
        level = children
    return deepest


def load_yaml(text: str, source: str):
    """Parse one YAML document safely: no Python tags (SafeLoader), nesting at most
    MAX_NESTING deep and at most MAX_YAML_NODES values once aliases are expanded; errors are
    one line naming `source`."""
    loader = None
    try:
        loader = _BoundedLoader(text)  # its reader already refuses some characters
        try:
            node = loader.get_single_node()
        except _TooDeep:
            raise _too_deep(source) from None
        if node is None:
            return None
        try:
            size = _expanded_size(node, {}, set())
        except ValueError as exc:
            raise UserFileError(f"{source}: refused: {exc}") from None
        except RecursionError:  # nesting through aliases
            raise _too_deep(source) from None
        if size > MAX_YAML_NODES:
            raise UserFileError(f"{source}: refused: its aliases expand to more than "
                                f"{MAX_YAML_NODES:,} values (the limit)")
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise UserFileError(f"{source}: malformed YAML{where}: "
                            f"{getattr(exc, 'problem', None) or exc}") from None
    finally:
        if loader is not None:
            loader.dispose()


def _finite_json_number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite number")
    return value


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def non_finite_path(data, path: str = "") -> str | None:
    """The dotted path of the first NaN or infinity inside `data`, or None."""
    if isinstance(data, float) and not math.isfinite(data):
        return path or "(top level)"
    items = (data.items() if isinstance(data, dict) else
             enumerate(data) if isinstance(data, list) else ())
    for key, value in items:
        found = non_finite_path(value, f"{path}.{key}" if path else str(key))
        if found:
            return found
    return None


def read_mapping(path: Path, max_bytes: int = MAX_INPUT_BYTES) -> dict:
    """A YAML or JSON file (by suffix) of at most `max_bytes` whose top level must be a
    mapping. No number in it may be NaN or infinite (every heterps input is a finite quantity;
    "unlimited" is null)."""
    text = read_text(path, max_bytes)
    if path.suffix == ".json":
        try:
            data = json.loads(text, parse_float=_finite_json_number,
                              parse_constant=_no_constant)
        except json.JSONDecodeError as exc:
            raise UserFileError(f"{path}: malformed JSON at line {exc.lineno}, column "
                                f"{exc.colno}: {exc.msg}") from None
        except ValueError as exc:
            raise UserFileError(f"{path}: {exc}") from None
        except RecursionError:
            raise _too_deep(str(path)) from None
    else:
        data = load_yaml(text, str(path))
    if nesting_depth(data) > MAX_NESTING:  # also YAML nested deeper through its aliases
        raise _too_deep(str(path))
    if not isinstance(data, dict):
        raise UserFileError(f"{path}: expected a mapping of fields at the top level")
    bad = non_finite_path(data)
    if bad:
        raise UserFileError(f"{path}: {bad}: must be a finite number (no NaN or infinity; "
                            "write null where a field allows 'unlimited')")
    return data


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
