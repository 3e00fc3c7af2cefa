"""Every command the README and docs/ show runs, and exits as the page says it does.

Blocks are found by tests/docs/markdown_commands.py (its docstring has the convention). The
default suite runs every bash block not marked `<!-- slow -->`, page by page in a scratch
working copy; the test marked `slow` runs each slow block after the fast blocks before it
on its page (they may write the files it reads).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.markdown_commands import (
    REPO,
    SHELL_TAGS,
    all_blocks,
    fences,
    missing_lines,
    pages,
    replace_block,
    workdir,
)

BIN = Path(sys.executable).parent
"""The venv's scripts (heterps-sim, heterps-exec, torchrun, python) come first on PATH."""

BLOCKS = all_blocks()
PAGES = sorted({b.page for b in BLOCKS})


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["MPLBACKEND"] = "Agg"
    env.pop("PYTHONPATH", None)
    return env


UPDATE = os.environ.get("HETERPS_DOCS_UPDATE") == "1"
"""Rewrite drifted text blocks with what the commands print now (markdown_commands)."""


def _run(command: str, cwd: Path, expected: int, timeout: float) -> str:
    """Run one command; its stdout then its stderr."""
    # `.venv/bin/heterps-sim` in a page means the venv's script, which is first on PATH here.
    command = re.sub(r"(^|[\s;|&(])\.venv/bin/", r"\1", command)
    words = shlex.split(command, comments=True) if command.strip() else []
    if words[:1] == ["make"]:
        # `make test` cannot run inside the tests: check the target exists and parses.
        argv = ["make", "-n", "-C", str(REPO), *words[1:]]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=_env())
        expected = 0
    else:
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=cwd,
                              capture_output=True, text=True, timeout=timeout, env=_env())
    if proc.returncode != expected:
        tail = (proc.stdout[-3000:] + "\n" + proc.stderr[-3000:]).strip()
        pytest.fail(f"`{command}` exited {proc.returncode}, the docs say {expected}:\n{tail}")
    return "" if words[:1] == ["make"] else proc.stdout + proc.stderr


def _run_blocks(blocks, cwd: Path, timeout: float) -> None:
    """Run each block's commands; where the page shows their output, compare it."""
    drifted = []
    for block in blocks:
        output = "".join(_run(command, cwd, block.exit_code, timeout)
                         for command in block.commands)
        if block.shown is None:
            continue
        output = output.replace(str(cwd), "/...")  # the scratch folder, as pages elide it
        missing = missing_lines(block.shown, output)
        if missing:
            drifted.append((block, missing, output))
    if UPDATE:  # bottom up, so the line numbers of the blocks above still hold
        for block, _, output in sorted(drifted, key=lambda d: -d[0].shown.line):
            replace_block(REPO / block.page, block.shown, output)
        return
    if drifted:
        block, missing, output = drifted[0]
        pytest.fail(f"{block.page}:{block.shown.line}: the page shows lines the command no "
                    f"longer prints ({len(drifted)} block(s) drifted on this page; "
                    f"HETERPS_DOCS_UPDATE=1 rewrites them):\n  first missing: "
                    f"{missing[0]!r}\n--- the command printed:\n{output[-3000:]}")


def test_the_docs_show_commands():
    """The extractor finds the pages' commands (a broken convention would silently find none)."""
    assert len(PAGES) >= 8, PAGES
    assert sum(len(b.commands) for b in BLOCKS) >= 40
    readme = [c for b in BLOCKS if b.page == "README.md" for c in b.commands]
    assert "make demo" in readme and "make test" in readme


@pytest.mark.parametrize("page", [p.relative_to(REPO).as_posix() for p in pages()])
def test_commands_are_in_bash_blocks(page):
    """A command in a ```sh or ```console block would escape the tests: pages use ```bash."""
    bad = [line for line, tag, _, _ in fences(REPO / page) if tag in SHELL_TAGS]
    assert not bad, f"{page}: shell blocks at lines {bad} must be tagged bash"


@pytest.mark.parametrize("page", [p for p in PAGES if any(not b.slow for b in BLOCKS
                                                          if b.page == p)])
def test_page_commands(page, tmp_path):
    cwd = workdir(tmp_path)
    _run_blocks([b for b in BLOCKS if b.page == page and not b.slow], cwd, timeout=300)


SLOW = [b for b in BLOCKS if b.slow]


@pytest.mark.slow
@pytest.mark.timeout(4 * 3600)
@pytest.mark.parametrize("block", SLOW, ids=[f"{b.page}:{b.line}" for b in SLOW])
def test_slow_commands(block, tmp_path):
    cwd = workdir(tmp_path)
    before = [b for b in BLOCKS if b.page == block.page and not b.slow and b.line < block.line]
    _run_blocks(before, cwd, timeout=300)
    _run_blocks([block], cwd, timeout=4 * 3600)


@pytest.mark.parametrize("page", [p.relative_to(REPO).as_posix() for p in pages()])
def test_every_fence_is_closed(page):
    """An unclosed fence swallows the rest of the page into one code block, and mkdocs
    --strict does not see it: every opening fence has its closing fence of the same kind."""
    open_fence, opened_at = None, 0
    for number, line in enumerate((REPO / page).read_text().splitlines(), start=1):
        m = re.match(r"^\s*(```+|~~~+)(.*)$", line)
        if not m or (m[1][0] == "`" and "`" in m[2]):  # inline code, not a fence (CommonMark)
            continue
        if open_fence is None:
            open_fence, opened_at = m[1], number
        elif m[1].startswith(open_fence) and not m[2].strip():
            open_fence = None
        elif m[2].strip():
            pytest.fail(f"{page}:{number}: a fence opens ({line.strip()!r}) inside the block "
                        f"opened at line {opened_at}: that block is not closed")
    assert open_fence is None, f"{page}:{opened_at}: this fence is never closed"
