"""heterps-exec run's start says what it is doing (on stderr, only when progress is shown):
loading and binding, preparing the data, launching torchrun and waiting for the ranks."""

from __future__ import annotations

import pytest

from heterps_exec.launch.prepare import prepare
from heterps_exec.launch.torchrun import LaunchOptions, launch
from heterps_exec.request import RunRequest
from heterps_sim.util import progress
from tests.exec.helpers import SCENARIO, tiny_plan

PHASES = ("heterps-exec: loading the scenario and the plan, binding the stages...",
          "heterps-exec: preparing the training data (synthetic)...",
          "heterps-exec: launching torchrun (2 ranks) and waiting for them to run 3 steps")


def _start(tmp_path, name: str):
    plan = tiny_plan(tmp_path / f"{name}.json", [10], [1, 1])
    spec, _ = prepare(RunRequest(plan=str(plan), scenario=SCENARIO, steps=3,
                                 out_dir=str(tmp_path / name), num_samples=256))
    # stopped by the launcher's timeout at once: only its start is of interest here
    outcome = launch(spec, LaunchOptions(timeout_s=0.2))
    assert outcome.timed_out


@pytest.mark.timeout(120)
def test_start_phases_on_stderr_when_shown_and_nothing_otherwise(tmp_path, capsys):
    with progress.showing(True):
        _start(tmp_path, "shown")
    out, err = capsys.readouterr()
    assert out == ""
    assert all(p in err for p in PHASES), err
    positions = [err.index(p) for p in PHASES]
    assert positions == sorted(positions)  # in the order they happen
    with progress.showing(None):  # capsys' stderr is not a terminal
        _start(tmp_path, "plain")
    assert capsys.readouterr() == ("", "")


def test_every_exec_command_takes_quiet():
    from heterps_exec.cli import COMMANDS, _parser
    parser = _parser(COMMANDS)
    args = parser.parse_args(["run", "p.json", "--scenario", "s.yaml", "--quiet"])
    assert args.quiet is True
    for name in COMMANDS:
        action = {a.dest: a for a in parser._subparsers._group_actions[0].choices[name]._actions}
        assert "quiet" in action, name
