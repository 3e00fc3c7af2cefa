"""Where numba keeps the compiled kernels, and one line when it has to compile them.

The kernels (cost/batch.py, schedulers/exact, schedulers/search/space.py, tiers/) are
compiled with `cache=True`, and numba's own cache has two gaps this module closes:

- It checks only the source file of the function it loads, so a kernel calling a formula of
  cost/amdahl.py or cost/dominant.py (or freezing a constant of core/limits.py) would load
  stale machine code after that other file changed: an upgrade, or an edit. `prepare` keeps
  the cache in a folder named by a fingerprint of every file the kernels compile
  (FINGERPRINTED), so a change to any of them compiles afresh.
- Where no folder it tries can be written (a read-only install run by a user without a
  writable home) numba refuses to define a cached function, so importing a kernel fails.
  The folder is the first writable of: NUMBA_CACHE_DIR (the user's choice), the package's
  own `__pycache__/numba`, the user's numba cache folder (~/.cache/numba/heterps), and a
  private folder under the temporary directory (0700 and ours alone: the cache is pickled).

The first call of a kernel in a fresh install compiles it (about 12 s for the exact
scheduler's on a 2-core machine). numba announces a compile ("numba:compile") only after a
cache miss, so the listener here prints NOTICE once, before the first compile of a heterps
kernel in the process (util.progress.notice: only on a terminal), and nothing when every
kernel loads from the cache.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from pathlib import Path

NOTICE = "compiling the cost kernels once (cached for next time)..."
PACKAGE = Path(__file__).resolve().parents[1]
"""heterps_sim/"""
FINGERPRINTED = ("cost", "schedulers/exact", "schedulers/search", "tiers", "core/limits.py")
"""Every file whose code or constants the kernels compile (tests/sim/cost/test_numba_cache.py
checks that every module defining a numba function is in here)."""
CHOSEN = "HETERPS_NUMBA_CACHE"
"""The folder a parent process chose (its NUMBA_CACHE_DIR is then not the user's)."""

_prepared = False
_announced = False


def fingerprint(package: Path = PACKAGE) -> str:
    """A hash of the FINGERPRINTED files' names and bytes."""
    digest = hashlib.sha256()
    for name in FINGERPRINTED:
        path = package / name
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(file.relative_to(package).as_posix().encode() + b"\0")
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def writable(folder: Path) -> bool:
    """Whether a file can be created in `folder` (made if missing), as numba checks it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
        return True
    except OSError:
        return False


def private_folder(parent: Path) -> Path:
    """parent/heterps-numba-UID, made 0700; if it exists and is not ours alone, a fresh one."""
    path = parent / f"heterps-numba-{os.getuid()}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = path.lstat()
        if (stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
                and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
            return path
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="heterps-numba-", dir=parent))


def cache_folder(roots: list[Path | None], temp: Path, name: str) -> Path:
    """roots[i]/name for the first root where that can be written, else a private folder
    under `temp`."""
    for root in roots:
        if root is not None and writable(root / name):
            return root / name
    return private_folder(temp) / name


def prepare() -> None:
    """Once per process, before the first kernel is defined (every module defining one
    imports cost/amdahl_numba.py, cost/dominant_numba.py or tiers/kernels.py first, which
    call this): numba's cache folder for the
    kernels (module docstring), and the compile listener (NOTICE)."""
    global _prepared
    if _prepared:
        return
    _prepared = True
    from numba.core import config
    from numba.misc.appdirs import AppDirs
    given = os.environ.get("NUMBA_CACHE_DIR", "")
    # a heterps parent's choice (a sweep's workers, ranks): its root, so the same folder
    provided = Path(given).parent if given and given == os.environ.get(CHOSEN) else \
        Path(given) if given else None
    in_tree = PACKAGE / "__pycache__" / "numba"
    user_wide = Path(AppDirs(appname="numba", appauthor=False).user_cache_dir) / "heterps"
    name = f"kernels-{fingerprint()}"
    folder = cache_folder([provided, in_tree, user_wide], Path(tempfile.gettempdir()), name)
    # numba re-reads NUMBA_* variables when one changes: the variable says the same
    config.CACHE_DIR = os.environ["NUMBA_CACHE_DIR"] = os.environ[CHOSEN] = str(folder)
    if folder.parent == in_tree:
        prune(in_tree, name)
    _listen()


STALE_S = 86_400.0
"""Other fingerprints' folders in the package's own cache untouched this long are removed
(an edited or upgraded tree leaves one behind per change)."""


def prune(root: Path, keep: str) -> None:
    """Remove root's kernels-* folders other than `keep` not modified for STALE_S."""
    import shutil
    import time
    for old in root.glob("kernels-*"):
        try:
            if old.name != keep and time.time() - old.stat().st_mtime > STALE_S:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass


def _listen() -> None:
    from numba.core import event

    class Announce(event.Listener):
        def on_start(self, ev) -> None:
            global _announced
            func = getattr(ev.data.get("dispatcher"), "py_func", None)
            if not _announced and getattr(func, "__module__", "").startswith("heterps_sim."):
                _announced = True
                from heterps_sim.util import progress
                progress.notice(NOTICE)

        def on_end(self, ev) -> None:
            pass

    event.register("numba:compile", Announce())
