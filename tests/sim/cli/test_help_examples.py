"""Every example a `--help` shows names input files that exist in the repository, so a new
user can paste it. Outputs (after `>`, -o, --out, --trace, ...) and UPPERCASE placeholders
(PLAN.json, RUN_FOLDER) are the user's to name."""

from __future__ import annotations

import importlib
import re
import shlex
from pathlib import Path

import pytest

from heterps_exec.cli import COMMANDS as EXEC_COMMANDS
from heterps_sim.cli import COMMANDS as SIM_COMMANDS

OUTPUT_FLAGS = {">", "-o", "--out", "--trace", "--save-state", "--checkpoint-dir", "--work-dir"}
INPUT = re.compile(r".*\.(ya?ml|json|csv|npy)$")


def _examples() -> list[str]:
    found = [example for _, _, example in SIM_COMMANDS.values() if example]
    for module, _ in EXEC_COMMANDS.values():
        doc = importlib.import_module(module).__doc__ or ""
        block = doc.split("example", 1)[1] if "example" in doc else ""
        lines = block.split("\n\n", 1)[0].replace("\\\n", " ").splitlines()
        found += [line.strip() for line in lines if line.strip().startswith("heterps-exec")]
    return found


def _inputs(example: str) -> list[str]:
    tokens = shlex.split(example.split("  (", 1)[0], comments=True)
    names = []
    for before, token in zip(["", *tokens], tokens):
        if before in OUTPUT_FLAGS or not INPUT.match(token) or "*" in token:
            continue
        if Path(token).stem.isupper() or Path(token).stem.replace("_", "").isupper():
            continue  # a placeholder the text asks the user to fill in
        names.append(token)
    return names


def test_there_are_examples_to_check():
    assert len(_examples()) >= 15


@pytest.mark.parametrize("example", _examples())
def test_example_inputs_exist(example):
    missing = [name for name in _inputs(example) if not Path(name).exists()]
    assert not missing, f"{example!r} names {missing}, which do not exist"
