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

from tests.docs.markdown_commands import REPO, SHELL_TAGS, all_blocks, fences, pages, workdir

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


def _run(command: str, cwd: Path, expected: int, timeout: float) -> None:
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


def _run_blocks(blocks, cwd: Path, timeout: float) -> None:
    for block in blocks:
        for command in block.commands:
            _run(command, cwd, block.exit_code, timeout)


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
