"""Every heterps-sim writer: an unwritable target is one line and exit 2 before the work;
folders end with done.json; an existing --out loses its stale files or is refused."""

from __future__ import annotations

import json

import pytest

from heterps_sim.cli import main

S = "scenarios/exec-tiny.yaml"
PLAN = "scenarios/plans/exec-tiny-pipeline.json"


def _targets(tmp_path):
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "a_folder").mkdir()
    return {"folder": tmp_path / "a_folder", "under a file": tmp_path / "a_file" / "o.json",
            "under /proc": "/proc/heterps-none/o.json"}


WRITERS = {
    "schedule --out": lambda t: ["schedule", S, "--out", str(t)],
    "compare --out": lambda t: ["compare", S, "--schedulers", "exact", "--out", str(t)],
    "evaluate --trace": lambda t: ["evaluate", S, PLAN, "--engine", "des", "--trace", str(t)],
    "convert-plan -o": lambda t: ["convert-plan", PLAN, "-o", str(t)],
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_unwritable_file_targets(writer, tmp_path, capsys):
    for why, target in _targets(tmp_path).items():
        code = main(WRITERS[writer](target))
        out, err = capsys.readouterr()
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (why, err)
        assert str(target).split("/o.json")[0] in err and out == "", (why, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "a_folder"]


@pytest.mark.parametrize("command", [["simulate", S, "--verify", "none"],
                                     ["tradeoff", S, "--schedulers", "exact", "--points", "2"],
                                     ["report", "--scenarios", "exec-tiny", "--points", "2"]])
def test_folder_targets_under_a_file_are_refused(command, tmp_path, capsys):
    (tmp_path / "a_file").write_text("x")
    code = main([*command, "--out", str(tmp_path / "a_file" / "run")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "a_file" in err, err


def test_tradeoff_rewrites_its_folder_without_stale_plans(tmp_path, capsys):
    out = tmp_path / "sweep"
    args = ["tradeoff", S, "--schedulers", "exact", "--limits", "1000:20000", "--out", str(out)]
    assert main([*args, "--points", "3"]) == 0
    first = sorted(p.name for p in (out / "plans" / "exact").iterdir())
    assert len(first) == 3 and (out / "done.json").is_file()
    stale = out / "plans" / "exact" / "99.json"
    stale.write_text("{}")
    assert main([*args, "--points", "1"]) == 0
    assert not stale.exists() and len(list((out / "plans" / "exact").iterdir())) == 1
    marker = json.loads((out / "done.json").read_text())
    assert "tradeoff.csv" in marker["files"] and marker["kind"] == "tradeoff"
    (out / "notes.txt").write_text("mine")
    code = main([*args, "--points", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "notes.txt" in err and (out / "tradeoff.csv").exists()
