"""`heterps-sim train-rl --quiet`: nothing on stderr (both trainers), where the same run
without it shows its progress bar (HETERPS_PROGRESS=1 shows progress off a terminal)."""

from __future__ import annotations

import pytest

from heterps_sim.cli import main
from heterps_sim.cli.train_rl import split_quiet

TRAINERS = {
    "rl-paper": ["--updates", "3", "--batch", "16"],
    "rl": ["--init", "shipped", "--ppo-updates", "2", "--ppo-seconds", "60", "--batch", "16"],
}


def test_split_quiet_takes_the_flag_out():
    assert split_quiet(["a.yaml", "--quiet", "--updates", "3"]) == (["a.yaml", "--updates", "3"],
                                                                   True)
    assert split_quiet(["a.yaml"]) == (["a.yaml"], False)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("scheduler", sorted(TRAINERS))
def test_quiet_train_rl_writes_nothing_to_stderr(tmp_path, capsys, monkeypatch, scheduler):
    monkeypatch.setenv("HETERPS_PROGRESS", "1")
    argv = ["train-rl", "--scheduler", scheduler, "scenarios/exec-tiny.yaml",
            *TRAINERS[scheduler]]
    loud = main([*argv, "--out", str(tmp_path / "loud.pt")])
    loud_err = capsys.readouterr().err
    quiet = main([*argv, "--out", str(tmp_path / "quiet.pt"), "--quiet"])
    out, err = capsys.readouterr()
    assert loud == 0 and ("train-rl" in loud_err or "rl-paper" in loud_err), loud_err
    assert quiet == 0 and err == "", err
    assert "wrote" in out and (tmp_path / "quiet.pt").is_file()
