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
  tests/docs/test_docs_build.py runs.
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
class Block:
    page: str
    """Path of the Markdown file, relative to the repository."""
    line: int
    """1-based line of the opening fence."""
    commands: tuple[str, ...]
    slow: bool = False
    exit_code: int = 0


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
    for line, tag, body, note in fences(path):
        if tag != "bash":
            continue
        words = note.replace(",", " ").split()
        exit_match = re.search(r"exit:\s*(\d+)", note)
        out.append(Block(page=str(path.relative_to(REPO)), line=line,
                         commands=split_commands(body), slow="slow" in words,
                         exit_code=int(exit_match[1]) if exit_match else 0))
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
