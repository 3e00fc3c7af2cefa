"""The commands the README and the manual show, read from their Markdown.

The convention (docs/index.md says it for writers):

- a fenced block tagged ```` ```bash ```` holds commands, one per line (a line ending in `\\`
  continues on the next; `#` lines are comments); output is shown in ```` ```text ```` blocks
  and is never run;
- an HTML comment on the line right before a bash block annotates it:
  `<!-- slow -->` (takes minutes: run only by the test marked `slow`, i.e. `make test-all`)
  and/or `<!-- exit: N -->` (every command of the block is expected to exit with N, not 0);
- commands run with bash in a scratch copy of the inputs (see `workdir`), one working folder
  per page, blocks in page order, so a later block may use a file an earlier one wrote;
- `make TARGET` lines are checked with `make -n` in the checkout (the target exists and its
  recipe parses): `make test` cannot run itself, and `make docs` is what
  tests/docs/test_docs_build.py runs;
- a ```` ```text ```` block right after a bash block (only blank lines between) is what the
  block's commands print (stdout, then stderr, command after command). In the manual (every
  page outside docs/results/, whose pages are dated records) each of its lines must appear in
  that output, in order, after `mask` (times, dates, scratch paths); a line `...` marks lines
  left out. `<!-- numbers vary -->` before the text block masks every number too (measured
  runs); `<!-- output not shown -->` says the text block is not this command's output.
  `HETERPS_DOCS_UPDATE=1 pytest tests/docs -k page_commands` rewrites drifted text blocks with
  what the commands print now.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHELL_TAGS = {"sh", "shell", "console", "zsh", "shell-session"}
"""Fence tags that would hide a command from the tests: pages use `bash` instead."""
COPIED = ("scenarios", "traces", "benchmarks", "tests/fixtures", "examples")
"""Folders a scratch working copy needs: inputs commands read, the benchmark scripts, the
user models the docs plan and train (tests/fixtures), and the example scripts."""

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<tag>[\w+-]*)")
_MARK = re.compile(r"^\s*<!--(?P<body>.*?)-->\s*$")


@dataclass(frozen=True)
class Shown:
    """A text block showing what a bash block prints."""

    line: int
    """1-based line of its opening fence."""
    lines: tuple[str, ...]
    numbers_vary: bool = False


@dataclass(frozen=True)
class Block:
    page: str
    """Path of the Markdown file, relative to the repository."""
    line: int
    """1-based line of the opening fence."""
    commands: tuple[str, ...]
    slow: bool = False
    exit_code: int = 0
    shown: Shown | None = None
    """The output the page shows for it (None: none, or a dated results page)."""


def pages() -> list[Path]:
    docs = sorted(p for p in (REPO / "docs").rglob("*.md") if "hooks" not in p.parts)
    return [REPO / "README.md", *docs]


def fences(path: Path) -> list[tuple[int, str, list[str], str]]:
    """(line, tag, body lines, the annotation comment before it or '') per fenced block."""
    lines = path.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, fence, indent = i, m["fence"], len(m["indent"])
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        body = [ln[indent:] if ln[:indent].isspace() else ln.lstrip() for ln in lines[i + 1:j]]
        k = start - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        note = _MARK.match(lines[k])["body"] if k >= 0 and _MARK.match(lines[k]) else ""
        found.append((start + 1, m["tag"].lower(), body, note))
        i = j + 1
    return found


def _end_line(path_lines: list[str], start: int) -> int:
    """1-based line of the closing fence of the block opened at 1-based line `start`."""
    fence = _FENCE.match(path_lines[start - 1])["fence"]
    j = start
    while j < len(path_lines) and not path_lines[j].strip().startswith(fence):
        j += 1
    return j + 1


def _shown_after(path: Path, found, index: int) -> Shown | None:
    """The text block right after bash block `index` (only blank lines between, or the
    annotation comment), in the manual; None otherwise."""
    if index + 1 >= len(found) or "results" in path.relative_to(REPO).parts:
        return None
    line, _, _, _ = found[index]
    nxt_line, tag, body, note = found[index + 1]
    if tag != "text" or "output not shown" in note:
        return None
    lines = path.read_text().splitlines()
    between = lines[_end_line(lines, line):nxt_line - 1]
    if any(x.strip() and not _MARK.match(x) for x in between):
        return None
    return Shown(line=nxt_line, lines=tuple(body), numbers_vary="numbers vary" in note)


_MASKS = (
    (re.compile(r"\d{4}-\d{2}-\d{2}[T _]\d{2}[:-]?\d{2}([:-]?\d{2})?(\.\d+)?(Z|[+-]\d{2}:?\d{2})?"),
     "<time>"),
    (re.compile(r"\b\d{8}-\d{6}\b"), "<time>"),  # run folders: NAME-YYYYMMDD-HHMMSS
    (re.compile(r"(/tmp|/var/folders|/private|/\.\.\.)/\S+"), "<path>"),  # /...: elided
    (re.compile(r"\b\d[\d,]*(\.\d+)?(e[+-]?\d+)?(\s?)(s|ms|min|h)\b(?!\w)"), "<t>"),
    (re.compile(r"\d[\d,]*(\.\d+)?(e[+-]?\d+)?\s?(s|it)/(s|it)\b"), "<rate>"),
)
_NUMBER = re.compile(r"[-+]?\d[\d,]*(\.\d+)?(e[+-]?\d+)?")


def mask(line: str, numbers: bool = False) -> str:
    """A line as compared: times, dates and scratch paths masked (and every number when
    `numbers`), trailing blanks dropped, runs of spaces as one (tables realign)."""
    for pattern, repl in _MASKS:
        line = pattern.sub(repl, line)
    if numbers:
        line = _NUMBER.sub("<n>", line)
    return re.sub(r"\s+", " ", line).strip()


def missing_lines(shown: Shown, output: str) -> list[str]:
    """The shown lines not found in `output` in order (empty: the page matches)."""
    have = [mask(x, shown.numbers_vary) for x in output.splitlines()]
    at, missing = 0, []
    for raw in shown.lines:
        want = mask(raw, shown.numbers_vary)
        if not want or want in ("...", "…"):
            continue
        try:
            at = have.index(want, at) + 1
        except ValueError:
            missing.append(raw)
    return missing


def replace_block(page: Path, shown: Shown, output: str) -> None:
    """Rewrite the text block at shown.line with `output` (HETERPS_DOCS_UPDATE)."""
    lines = page.read_text().splitlines()
    start = shown.line  # the fence is lines[start - 1]; the body starts at lines[start]
    end = _end_line(lines, start) - 1  # index of the closing fence
    indent = re.match(r"\s*", lines[start - 1]).group(0)
    body = [indent + x if x.strip() else "" for x in output.rstrip("\n").splitlines()]
    page.write_text("\n".join(lines[:start] + body + lines[end:]) + "\n")


def split_commands(body: list[str]) -> tuple[str, ...]:
    commands, current = [], ""
    for raw in body:
        line = raw.rstrip()
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            current += line[:-1].rstrip() + " "
            continue
        commands.append((current + line.strip()).strip())
        current = ""
    if current.strip():
        commands.append(current.strip())
    return tuple(commands)


def blocks(path: Path) -> list[Block]:
    out = []
    found = fences(path)
    for index, (line, tag, body, note) in enumerate(found):
        if tag != "bash":
            continue
        words = note.replace(",", " ").split()
        exit_match = re.search(r"exit:\s*(\d+)", note)
        out.append(Block(page=str(path.relative_to(REPO)), line=line,
                         commands=split_commands(body), slow="slow" in words,
                         exit_code=int(exit_match[1]) if exit_match else 0,
                         shown=_shown_after(path, found, index)))
    return out


def all_blocks() -> list[Block]:
    return [b for p in pages() for b in blocks(p)]


def workdir(tmp: Path) -> Path:
    """A scratch working copy: the input folders copied, so outputs land in tmp, not the checkout."""
    for name in COPIED:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, tmp / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return tmp
