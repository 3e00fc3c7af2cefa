"""train-rl exits 1 with one line when the policy never sampled a feasible plan, 0 otherwise;
the checkpoint is written either way."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from heterps_sim.cli import main
from heterps_sim.schedulers.rl.outcome import no_feasible_plan_exit


def _task(name, plan, evaluations=8):
    return SimpleNamespace(problem=SimpleNamespace(name=name), best_plan=plan,
                           evaluations=evaluations)


def test_exit_names_every_problem_without_a_feasible_plan(capsys):
    assert no_feasible_plan_exit([_task("a", [0]), _task("b", [1])]) == 0
    assert capsys.readouterr().err == ""
    assert no_feasible_plan_exit([_task("a", [0]), _task("b", None), _task("c", None)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "b, c" in err and " a" not in err.split("on ")[1][:5]


def test_problems_never_sampled_on_are_not_missed(capsys):
    # an imitation-only run (the shipped checkpoint's command) samples no plan at all
    assert no_feasible_plan_exit([_task("a", None, 0), _task("b", None, 0)]) == 0
    assert capsys.readouterr().err == ""
    assert no_feasible_plan_exit([_task("a", None, 0), _task("b", None, 3)]) == 1
    assert "on b " in capsys.readouterr().err


def test_an_imitation_only_run_exits_0(tmp_path, capsys):
    from heterps_sim.schedulers.rl.stagewise.train import main as train
    out = tmp_path / "p.pt"
    code = train(["--imitation-problems", "2", "--imitation-sizes", "4",
                  "--imitation-updates", "2", "--imitation-seconds", "1e6", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    assert out.is_file()


@pytest.mark.parametrize("scheduler, extra", [("rl-paper", ["--batch", "4"])])
def test_train_rl_on_an_impossible_problem_exits_1(tmp_path, capsys, scheduler, extra):
    out = tmp_path / "p.pt"
    code = main(["train-rl", "--scheduler", scheduler, "scenarios/dlrm-impossible.yaml",
                 "--updates", "2", "--out", str(out), "--no-progress", *extra])
    err = capsys.readouterr().err
    assert code == 1 and "no feasible plan was sampled on dlrm-impossible" in err
    assert out.is_file()


def test_train_rl_on_a_feasible_problem_exits_0(tmp_path, capsys):
    code = main(["train-rl", "scenarios/exec-tiny.yaml", "--updates", "3", "--batch", "16",
                 "--out", str(tmp_path / "p.pt"), "--no-progress"])
    assert code == 0, capsys.readouterr().err
