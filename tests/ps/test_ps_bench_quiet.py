"""`heterps-exec ps-bench`'s progress lines follow the shared progress rules: shown where
progress is on (a terminal, HETERPS_PROGRESS=1), never with --quiet."""

from __future__ import annotations

import json

import pytest

import heterps_exec.ps.bench
from heterps_exec.cli import main

TINY = ["ps-bench", "--rows", "20000", "--batch", "256", "--batches", "4", "--json"]


def _fake_bench(**kwargs):
    kwargs["progress"]("PS world: pulls")
    return {"rows": kwargs["rows"]}


@pytest.mark.parametrize("quiet, err", [(False, "ps-bench: PS world: pulls...\n"), (True, "")])
def test_progress_lines_go_through_the_progress_switch(capsys, monkeypatch, quiet, err):
    monkeypatch.setenv("HETERPS_PROGRESS", "1")
    monkeypatch.setattr(heterps_exec.ps.bench, "run_bench", _fake_bench)
    assert main([*TINY, *(["--quiet"] if quiet else [])]) == 0
    out, got = capsys.readouterr()
    assert json.loads(out) == {"rows": 20000} and got == err


@pytest.mark.timeout(150)
def test_a_quiet_real_run_writes_nothing_to_stderr(capsys, monkeypatch):
    monkeypatch.setenv("HETERPS_PROGRESS", "1")
    assert main([*TINY, "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["pull_rows_per_s"] > 0 and err == ""
