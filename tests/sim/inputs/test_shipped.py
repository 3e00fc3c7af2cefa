"""The shipped files are found by name wherever heterps is installed: a scenario name, or the
docs' `scenarios/...` paths from any working folder; a user's own file is never shadowed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from heterps_sim.cli import main
from heterps_sim.inputs.shipped import SHIPPED, resolve, scenarios

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def test_a_name_or_a_docs_path_finds_the_shipped_file_from_anywhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    want = (REPO / "scenarios" / "exec-tiny.yaml").resolve()
    assert resolve("exec-tiny").resolve() == want
    assert resolve("exec-tiny.yaml").resolve() == want
    assert resolve("scenarios/exec-tiny.yaml").resolve() == want
    plan = resolve("scenarios/plans/exec-tiny-pipeline.json")
    assert plan.resolve() == (REPO / "scenarios/plans/exec-tiny-pipeline.json").resolve()
    profile = resolve("traces/profiles/vm-links.json")
    assert profile.resolve() == (REPO / "traces/profiles/vm-links.json").resolve()
    trace = resolve("traces/spot/oobleck-p3-trace.csv")  # a market's availability trace
    assert trace.resolve() == (REPO / "traces/spot/oobleck-p3-trace.csv").resolve()
    # nothing shipped by that name, or a path that climbs out: the path as typed
    assert resolve("no-such-scenario") == Path("no-such-scenario")
    assert resolve("scenarios/../pyproject.toml") == Path("scenarios/../pyproject.toml")


def test_the_users_own_file_wins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scenarios").mkdir()
    mine = tmp_path / "scenarios" / "exec-tiny.yaml"
    mine.write_text("name: mine\n")
    assert resolve("scenarios/exec-tiny.yaml") == Path("scenarios/exec-tiny.yaml")
    (tmp_path / "exec-tiny").write_text("name: also mine\n")
    assert resolve("exec-tiny") == Path("exec-tiny")


def test_the_scenarios_command_lists_every_shipped_scenario(capsys):
    assert main(["scenarios", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in listed] == [p.stem for p in sorted((REPO / "scenarios").glob("*.yaml"))]
    assert all(s["description"] for s in listed)
    assert [s.name for s in scenarios()] == [s["name"] for s in listed]


def test_commands_take_a_shipped_name_outside_the_checkout(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["evaluate", "exec-tiny", "scenarios/plans/exec-tiny-pipeline.json",
                 "--json"]) in (0, 1)
    by_name = json.loads(capsys.readouterr().out)
    monkeypatch.chdir(REPO)
    assert main(["evaluate", "scenarios/exec-tiny.yaml", "scenarios/plans/exec-tiny-pipeline.json",
                 "--json"]) in (0, 1)
    by_path = json.loads(capsys.readouterr().out)
    assert by_name["cost_usd"] == by_path["cost_usd"] and by_name["feasible"]
    monkeypatch.chdir(tmp_path)
    assert main(["check", "no-such-scenario"]) == 2
    assert "no-such-scenario" in capsys.readouterr().err


def _wheel(tmp: Path) -> Path:
    """Build the wheel from a copy of the checkout (setuptools writes build/ beside it)."""
    src = tmp / "src"
    shutil.copytree(REPO, src, symlinks=True, ignore=shutil.ignore_patterns(
        ".venv", ".git", "__pycache__", "*.egg-info", "build", "runs", "site", ".*cache"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(tmp / "dist"), str(src)],
                   check=True, timeout=600, capture_output=True)
    (wheel,) = (tmp / "dist").glob("heterps-*.whl")
    return wheel


@pytest.mark.slow
def test_the_wheel_ships_the_scenarios_and_the_getting_started_commands_run(tmp_path):
    wheel = _wheel(tmp_path)
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        z.extractall(site)
    for folder, shipped in (("scenarios", "scenarios"), ("examples", "examples"),
                            ("traces/profiles", "traces/profiles")):
        for path in (REPO / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                rel = path.relative_to(REPO / folder)
                assert f"heterps_sim/shipped/{shipped}/{rel}" in names, rel
    # outside any checkout, the wheel's copy first on the path (the venv's editable install
    # is consulted after it), as the README and getting-started pages run them
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "MPLBACKEND": "Agg",
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    where = subprocess.run([sys.executable, "-c", "import heterps_sim; print(heterps_sim.__file__)"],
                           cwd=cwd, env=env, capture_output=True, text=True, check=True)
    assert where.stdout.strip().startswith(str(site))
    for line in ("heterps-sim scenarios",
                 "heterps-sim simulate scenarios/dlrm-criteo1tb-aws.yaml --out runs/demo",
                 "heterps-sim simulate scenarios/exec-tiny.yaml --out runs/tiny",
                 "heterps-sim check scenarios/onprem-measured.yaml",
                 "heterps-sim evaluate exec-tiny scenarios/plans/exec-tiny-pipeline.json",
                 "heterps-exec run scenarios/plans/exec-tiny-pipeline.json --scenario exec-tiny "
                 "--binding scenarios/bindings/emulated.yaml --steps 4 --out runs/exec"):
        proc = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=900)
        assert proc.returncode == 0, (line, proc.stderr[-2000:])
    assert (cwd / "runs" / "demo" / "plan.json").is_file()
    assert (cwd / "runs" / "exec" / "result.json").is_file()
    assert SHIPPED.name == "shipped"
