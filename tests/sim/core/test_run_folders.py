"""Run folders: never shared between two runs, always directly under the runs folder, and a
folder that cannot be made is one line of bad input."""

from __future__ import annotations

import multiprocessing
import os
from datetime import datetime
from pathlib import Path

import pytest

from heterps_sim.core.files import (
    RUN_NAME_MAX,
    UserFileError,
    new_run_folder,
    run_folder_name,
)

NOW = datetime(2026, 11, 24, 12, 0, 0)


def test_runs_started_in_the_same_second_get_their_own_folders(tmp_path):
    made = [new_run_folder("dlrm", tmp_path, NOW) for _ in range(4)]
    assert [p.name for p in made] == ["dlrm-20261124-120000", "dlrm-20261124-120000-2",
                                      "dlrm-20261124-120000-3", "dlrm-20261124-120000-4"]
    assert all(p.is_dir() and p.parent == tmp_path for p in made)


def _make(parent: str) -> str:
    return str(new_run_folder("same", Path(parent), NOW))


def test_concurrent_processes_never_share_a_folder(tmp_path):
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        made = pool.map(_make, [str(tmp_path)] * 12, chunksize=1)
    assert len(set(made)) == 12


@pytest.mark.parametrize("label", ["../../elsewhere/x", "/etc/passwd", "a\0b", "..", ".", "",
                                   "x" * 300, "name with spaces", "ü-ñ", "-.-"])
def test_any_label_stays_one_component_under_the_parent(tmp_path, label):
    path = new_run_folder(label, tmp_path / "runs", NOW)
    assert path.parent == tmp_path / "runs" and path.is_dir()
    name = run_folder_name(label)
    assert 0 < len(name) <= RUN_NAME_MAX and name not in (".", "..")
    assert "/" not in name and "\0" not in name and not name.startswith((".", "-"))


def test_ordinary_names_are_kept():
    assert run_folder_name("default-2emb-aws") == "default-2emb-aws"
    assert run_folder_name("tradeoff-ctr_dnn.v2") == "tradeoff-ctr_dnn.v2"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_parent_is_bad_input(tmp_path):
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(UserFileError, match="cannot create a run folder"):
            new_run_folder("x", tmp_path / "runs", NOW)
    finally:
        tmp_path.chmod(0o700)


def test_a_parent_under_a_regular_file_is_bad_input(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(UserFileError, match=r"file/runs: cannot create a run folder"):
        new_run_folder("x", tmp_path / "file" / "runs", NOW)


def test_simulate_writes_a_hostile_scenario_name_under_runs(tmp_path, monkeypatch, capsys):
    import yaml

    from heterps_sim.cli import main
    from heterps_sim.inputs.scenario import DEFAULT_SCENARIO
    data = yaml.safe_load(DEFAULT_SCENARIO.read_text())
    data["name"] = "../../elsewhere/x"
    (tmp_path / "work").mkdir()
    scenario = tmp_path / "work" / "hostile.yaml"
    scenario.write_text(yaml.safe_dump(data))
    monkeypatch.chdir(tmp_path / "work")
    assert main(["simulate", str(scenario)]) == 0
    assert main(["simulate", str(scenario)]) == 0
    folders = sorted((tmp_path / "work" / "runs").iterdir())
    assert len(folders) == 2 and all(f.name.startswith("elsewhere-x-") for f in folders)
    assert all((f / "plan.json").is_file() for f in folders)
    assert not (tmp_path / "elsewhere").exists()
    capsys.readouterr()
