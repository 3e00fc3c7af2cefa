"""util.progress: phase lines and bars go to stderr only, only where someone watches (a
terminal, or HETERPS_PROGRESS=1), never with --quiet; stdout is the same with or without them.
The long commands (schedule --scheduler rl, tradeoff, report, heterps-exec run's start) say
what they are doing."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest

from heterps_sim.util import progress

REPO = Path(__file__).resolve().parents[3]
TINY = str(REPO / "scenarios" / "exec-tiny.yaml")


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv(progress.ENV, raising=False)


def _everything():
    progress.phase("phase one")
    progress.notice("a notice")
    for _ in progress.bar(range(3), desc="things", unit="thing"):
        pass
    with progress.clock(2.0, "budget") as tick:
        tick(1.0, updates=1)


def test_shown_when_forced_on_stderr_only(capsys):
    with progress.showing(True):
        _everything()
    out, err = capsys.readouterr()
    assert out == ""
    assert "phase one...\n" in err and "a notice\n" in err
    assert "things:" in err and "/3 " in err
    assert "budget" in err and "updates=1" in err


@pytest.mark.parametrize("how", ["quiet", "not a terminal", "env off"])
def test_nothing_written_when_off(capsys, monkeypatch, how):
    # capsys' stderr is not a terminal: the automatic setting is off there
    if how == "env off":
        monkeypatch.setenv(progress.ENV, "0")
    with progress.showing(False if how == "quiet" else None):
        assert not progress.enabled()
        _everything()
    assert capsys.readouterr() == ("", "")


def test_env_turns_it_on_where_stderr_is_not_a_terminal(capsys, monkeypatch):
    monkeypatch.setenv(progress.ENV, "1")
    progress.phase("logged")
    assert capsys.readouterr().err == "logged...\n"


def test_inner_hides_phases_and_bars_but_not_notices(capsys):
    with progress.showing(True), progress.inner():
        progress.phase("hidden")
        for _ in progress.bar(range(2), desc="hidden bar", unit="x"):
            pass
        progress.notice("compiling")
    assert capsys.readouterr().err == "compiling\n"


def test_setting_is_restored():
    with progress.showing(False):
        with progress.showing(True):
            assert progress.enabled()
        assert not progress.enabled()


# -- commands ----------------------------------------------------------------------------------
_TIMINGS = {"wall_s", "setup_s", "train_s", "decode_s"}


def _without_timings(data):
    if isinstance(data, dict):
        return {k: _without_timings(v) for k, v in data.items() if k not in _TIMINGS}
    if isinstance(data, list):
        return [_without_timings(v) for v in data]
    return data


def test_rl_schedule_says_what_it_does_and_stdout_is_unchanged(capsys, monkeypatch):
    from heterps_sim.cli import main
    line = ["schedule", TINY, "--scheduler", "rl", "--set", "updates=2", "--set",
            "decode_samples=16", "--set", "polish_starts=2", "--verify", "none", "--json"]
    monkeypatch.setenv(progress.ENV, "1")
    assert main(line) == 0
    shown = capsys.readouterr()
    monkeypatch.delenv(progress.ENV)
    assert main(line) == 0
    plain = capsys.readouterr()
    assert plain.err == ""  # stderr is not a terminal here: nothing
    for text in ("planning: rl (flushed closed form (gpipe, m = 2-64))...", "rl: fine-tuning the policy (PPO)",
                 "updates=2", "rl: polishing the best 2 plans", "polish:"):
        assert text in shown.err, text
    # stdout: one JSON document, the same but for the run's timings
    assert _without_timings(json.loads(shown.out)) == _without_timings(json.loads(plain.out))
    assert "\r" not in shown.out and "fine-tuning" not in shown.out


def _on_a_terminal(args: list[str]) -> tuple[bytes, str, int]:
    """Run a command with stderr on a pseudo-terminal: (stdout bytes, stderr text, exit)."""
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != progress.ENV}
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=slave, cwd=REPO, env=env)
    os.close(slave)
    err = b""
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            break
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        err += chunk
    out = proc.stdout.read()
    rc = proc.wait(timeout=120)
    os.close(master)
    return out, err.decode(errors="replace"), rc


def test_a_terminal_gets_phases_a_pipe_gets_none_and_stdout_is_the_same_bytes():
    cli = [sys.executable, "-m", "heterps_sim.cli", "schedule", TINY, "--verify", "des"]
    out_tty, err_tty, rc = _on_a_terminal(cli)
    assert rc == 0
    assert "planning: exact (flushed closed form (gpipe, m = 2-64))..." in err_tty
    assert "checking the plan in the simulator" in err_tty
    piped = subprocess.run(cli, capture_output=True, cwd=REPO,
                           env={k: v for k, v in os.environ.items() if k != progress.ENV})
    assert piped.returncode == 0 and piped.stderr == b""
    # byte for byte but for the wall-clock seconds it prints ("0.012 s")
    def strip(b: bytes) -> bytes:
        return re.sub(rb"\d+\.\d+ s\b", b"T s", b)
    assert strip(out_tty) == strip(piped.stdout) and strip(piped.stdout).count(b"\n") > 5
    _, err_quiet, rc = _on_a_terminal([*cli, "--quiet"])
    assert rc == 0 and err_quiet == ""


def test_tradeoff_bar_and_report_phases(tmp_path, capsys):
    from heterps_sim.studies.report import write_report
    with progress.showing(True):
        write_report(tmp_path / "report", scenarios="exec-tiny", points=2)
    out, err = capsys.readouterr()
    assert out == ""
    assert "report: exec-tiny (1/1): the optimum" in err
    assert "tradeoff:" in err and "point" in err
    # the schedulers' own phases stay under the sweep's bar
    assert "scheduling:" not in err
    with progress.showing(False):
        write_report(tmp_path / "report", scenarios="exec-tiny", points=2)
    assert capsys.readouterr() == ("", "")
