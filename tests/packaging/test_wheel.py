"""A plain (non-editable) install works outside a source checkout: the catalog, the scenario
schema, the default scenario and the shipped RL checkpoint are package data, not files read
from the repository tree.

The wheel is built from a copy of the tracked files (the checkout stays clean) and installed
with --no-deps into a fresh virtual environment; the dependencies come from the running
environment through a path file (not its site dir, so its editable install stays inactive).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 300


def run(cmd, cwd, **kwargs):
    return subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True,
                          timeout=TIMEOUT_S, **kwargs)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv (outside the checkout) with the wheel installed; returns its bin dir."""
    tmp = tmp_path_factory.mktemp("wheel")
    tracked = run(["git", "ls-files", "-z"], ROOT, check=True).stdout.split("\0")
    src = tmp / "src"
    for name in filter(None, tracked):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                 "-q", "-w", tmp / "dist", src], tmp)
    assert built.returncode == 0, built.stderr
    wheel = next((tmp / "dist").glob("heterps-*.whl"))
    venv = tmp / "venv"
    run([sys._base_executable, "-m", "venv", "--without-pip", venv], tmp, check=True)
    python = venv / "bin" / "python"
    installed = run([sys.executable, "-m", "pip", "--python", python, "install", "-q",
                     "--no-deps", wheel], tmp)
    assert installed.returncode == 0, installed.stderr
    site = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
               tmp, check=True).stdout.strip()
    (Path(site) / "deps-from-test-env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


def test_the_installed_package_is_the_wheel_not_the_checkout(installed):
    out = run([installed / "python", "-c", "import heterps_sim, heterps_exec; "
               "print(heterps_sim.__file__); print(heterps_exec.__file__)"], installed.parent)
    assert out.returncode == 0, out.stderr
    for line in out.stdout.split():
        assert Path(line).is_relative_to(installed.parent), line


def test_package_data_ships_in_the_wheel(installed):
    code = ("from heterps_sim.inputs import catalog, scenario; "
            "from heterps_sim.schedulers.rl.stagewise.train import SHIPPED; "
            "print(catalog.CATALOG_PATH); print(scenario.SCHEMA_PATH); "
            "print(scenario.DEFAULT_SCENARIO); print(SHIPPED)")
    out = run([installed / "python", "-c", code], installed.parent)
    assert out.returncode == 0, out.stderr
    paths = [Path(line) for line in out.stdout.split()]
    assert len(paths) == 4
    for path in paths:
        assert path.is_relative_to(installed.parent) and path.stat().st_size > 0, path


def test_simulate_and_check_run_outside_the_checkout(installed, tmp_path):
    simulate = run([installed / "heterps-sim", "simulate", "--out", tmp_path / "runs"], tmp_path)
    assert simulate.returncode == 0, simulate.stderr
    assert "FEASIBLE" in simulate.stdout
    assert list((tmp_path / "runs").rglob("plan.json")), "simulate wrote no plan"
    scenarios = sorted((ROOT / "scenarios").glob("*.yaml"))
    check = run([installed / "heterps-sim", "check", *scenarios], tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert all(path.stem in check.stdout for path in scenarios)
    assert "catalog" not in check.stderr.lower()
