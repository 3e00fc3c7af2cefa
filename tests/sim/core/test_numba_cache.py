"""util/numba_cache.py: the compiled kernels are cached (one line says so when they are
compiled, none when they load from the cache), also from a read-only install with a
read-only home, where numba alone refuses to define a cached function; a change to a file a
kernel calls into compiles afresh (numba alone loads the stale code)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from heterps_sim.util.numba_cache import (
    FINGERPRINTED,
    NOTICE,
    PACKAGE,
    cache_folder,
    fingerprint,
    private_folder,
    writable,
)

REPO = Path(__file__).resolve().parents[3]
CALL = ("from heterps_sim.cost import amdahl_numba as a; "
        "assert a.step_time(1.0, 0.5, 0.5, 2) == 1.25")


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_CACHE_DIR", "HETERPS_PROGRESS")}
    return {**env, **extra}


def _run(env: dict, cwd: Path, prefix: list[str] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-c", CALL], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


def test_one_line_when_compiling_none_when_cached(tmp_path):
    cache = tmp_path / "cache"
    first = _run(_env(NUMBA_CACHE_DIR=str(cache), HETERPS_PROGRESS="1"), tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stderr == NOTICE + "\n"
    assert list(cache.rglob("*.nbi")), "numba wrote no cache index"
    again = _run(_env(NUMBA_CACHE_DIR=str(cache), HETERPS_PROGRESS="1"), tmp_path)
    assert again.returncode == 0 and again.stderr == ""


def test_silent_off_a_terminal_but_still_cached(tmp_path):
    cache = tmp_path / "cache"
    done = _run(_env(NUMBA_CACHE_DIR=str(cache)), tmp_path)
    assert done.returncode == 0 and done.stderr == ""
    assert list(cache.rglob("*.nbi"))


def test_folder_is_the_first_writable_root(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    dead = blocker / "sub"  # under a regular file: unwritable, even for root
    ok, other = tmp_path / "ok", tmp_path / "other"
    assert not writable(dead) and writable(ok)
    assert cache_folder([None, ok, other], tmp_path, "k") == ok / "k"
    assert cache_folder([dead, dead, other], tmp_path, "k") == other / "k"
    (tmp_path / "tmp").mkdir()
    fallback = cache_folder([dead, None, dead], tmp_path / "tmp", "k")
    assert fallback == tmp_path / "tmp" / f"heterps-numba-{os.getuid()}" / "k"


def test_fingerprint_covers_every_module_that_defines_a_kernel(tmp_path):
    covered = [PACKAGE / name for name in FINGERPRINTED]
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        if "njit(" in text or "numba.jit(" in text or "@jit" in text:
            assert any(path == c or c in path.parents for c in covered), path
    copy = tmp_path / "heterps_sim"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pt"))
    before = fingerprint(copy)
    assert before == fingerprint(PACKAGE)
    (copy / "core" / "progress.py").write_text("# not compiled by numba\n")
    assert fingerprint(copy) == before
    limits = copy / "core" / "limits.py"
    limits.write_text(limits.read_text() + "\n")
    assert fingerprint(copy) != before


SHORTFALL = """
import numpy as np
from heterps_sim.schedulers.search.space import _shortfall
a = np.array
print(_shortfall(a([[0]]), a([[1.0]]), a([[0.0]]), a([[0.5]]), a([0.0]), a([1.0]), 0.0, 1.0,
                 1.0, True, np.zeros(1, np.int64))[0])
"""


def test_a_changed_formula_in_another_file_is_compiled_afresh(tmp_path):
    """search/space.py's _shortfall calls cost/amdahl.py's serial_time: after serial_time
    changes, the cached _shortfall must not run the old one."""
    site = tmp_path / "site"
    shutil.copytree(PACKAGE, site / "heterps_sim",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pt"))
    env = _env(PYTHONPATH=str(site))

    def shortfall() -> float:
        done = subprocess.run([sys.executable, "-c", SHORTFALL], capture_output=True,
                              text=True, env=env, cwd=tmp_path, timeout=300)
        assert done.returncode == 0, done.stderr
        return float(done.stdout)

    assert shortfall() == 0.5  # serial_time(P=1, S=0, alpha=0.5)
    amdahl = site / "heterps_sim" / "cost" / "amdahl.py"
    old = "    return (1.0 - alpha) * par + ser\n"
    assert amdahl.read_text().count(old) == 1
    amdahl.write_text(amdahl.read_text().replace(old, "    return (1.0 - alpha) * par + ser + 1.0\n"))
    assert shortfall() == 1.5
    assert len(list((site / "heterps_sim" / "__pycache__" / "numba").glob("kernels-*"))) == 2


def test_private_folder_is_ours_alone(tmp_path):
    mine = private_folder(tmp_path)
    assert mine.name == f"heterps-numba-{os.getuid()}"
    assert stat.S_IMODE(mine.stat().st_mode) == 0o700
    assert private_folder(tmp_path) == mine  # reused across runs
    shutil.rmtree(mine)
    mine.mkdir()
    mine.chmod(0o777)  # one anybody could have planted a pickled cache in: not used
    other = private_folder(tmp_path)
    assert other != mine and other.parent == tmp_path
    assert stat.S_IMODE(other.stat().st_mode) == 0o700


def _read_only_mounts(*folders: Path) -> list[str]:
    """A shell prefix running the command with `folders` bind-mounted read-only (a private
    mount namespace), or skip where that is not allowed."""
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0 or shutil.which("mount") is None:
        pytest.skip("needs unshare -m (a private mount namespace) to make folders read-only")
    mounts = " && ".join(f"mount --bind {f} {f} && mount -o remount,ro,bind {f}"
                         for f in folders)
    return ["unshare", "-m", "sh", "-c", f'{mounts} && exec "$@"', "sh"]


def test_read_only_install_and_read_only_home(tmp_path):
    site, home, tmp = tmp_path / "site", tmp_path / "home", tmp_path / "tmp"
    shutil.copytree(REPO / "heterps_sim", site / "heterps_sim",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pt"))
    home.mkdir()
    tmp.mkdir()
    prefix = _read_only_mounts(site, home)
    env = _env(PYTHONPATH=str(site), HOME=str(home), TMPDIR=str(tmp), HETERPS_PROGRESS="1")
    env.pop("XDG_CACHE_HOME", None)
    first = _run(env, tmp_path, prefix)
    assert first.returncode == 0, first.stderr  # numba alone: "cannot cache function"
    assert first.stderr == NOTICE + "\n"
    folder = tmp / f"heterps-numba-{os.getuid()}"
    assert list(folder.rglob("*.nbi")), "the fallback folder holds no cache"
    assert not list(site.rglob("*.nbi")) and not list(home.rglob("*"))
    again = _run(env, tmp_path, prefix)
    assert again.returncode == 0 and again.stderr == ""


def test_read_only_install_caches_in_the_users_folder(tmp_path):
    site, home = tmp_path / "site", tmp_path / "home"
    shutil.copytree(REPO / "heterps_sim", site / "heterps_sim",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pt"))
    home.mkdir()
    env = _env(PYTHONPATH=str(site), HOME=str(home), HETERPS_PROGRESS="1")
    env.pop("XDG_CACHE_HOME", None)
    prefix = _read_only_mounts(site)
    first = _run(env, tmp_path, prefix)
    assert first.returncode == 0 and first.stderr == NOTICE + "\n", first.stderr
    assert list((home / ".cache" / "numba").rglob("*.nbi"))
    again = _run(env, tmp_path, prefix)
    assert again.returncode == 0 and again.stderr == ""
