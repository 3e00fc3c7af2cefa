"""Writing results: every file whole or absent, durable, with the user's normal permissions.

Both command lines write through here (result and plan JSON, CSV tables, traces, figures, run
folders). A file is written to a temporary file beside its target, flushed and fsynced, then
renamed over the target (`os.replace`, atomic on POSIX), and the directory is fsynced so the
rename survives a power cut. A reader therefore sees the old file or the new one, never half of
either; the temporary file is removed on any failure, Ctrl-C included. New files get mode
0666 minus the umask (0644 usually), as `open()` would give them.

A target that cannot be written (a directory, a read-only file or folder, a path under a
regular file) is one line of bad input (`OutputError`, exit 2). `check_target` asks the same
question before long work starts, so a typo in `--out` costs nothing.

A folder of several files (a run folder, a trade-off sweep) is complete when its marker
`done.json` exists: it is written last, listing the files, and removed first when a folder is
rewritten, so an interrupted run never leaves a folder that looks complete.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from heterps_sim.core.files import UserFileError

MARKER = "done.json"
"""The completion marker of a multi-file output folder; written last."""

_UMASK_LOCK = threading.Lock()


class OutputError(UserFileError):
    """An output path that cannot be written: one line naming it and why; exit 2."""


def _umask() -> int:
    with _UMASK_LOCK:  # os.umask can only be read by setting it
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _nearest_existing(path: Path) -> Path:
    """The path itself or its nearest ancestor that exists (as anything)."""
    for p in (path, *path.parents):
        if os.path.lexists(p):
            return p
    return Path(".")


def _writable_dir(folder: Path) -> bool:
    """Whether a file can be created in `folder`: tried, not guessed from the mode bits (root,
    read-only mounts and ACLs all answer differently from os.access)."""
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".heterps-probe.", suffix=".tmp")
    except OSError:
        return False
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(name)
    return True


def check_target(path: str | Path, *, folder: bool = False) -> Path:
    """Raise OutputError unless `path` can be written (as a file, or as a folder to create or
    fill when `folder`); changes nothing. Call it before long work."""
    path = Path(path)
    if str(path) == "" or path.name in ("", ".", ".."):
        if not folder:
            raise OutputError(f"{path}: not a file name")
    existing = _nearest_existing(path)
    if existing == path:
        if folder:
            if not path.is_dir():
                raise OutputError(f"{path}: exists and is not a folder")
            if not _writable_dir(path):
                raise OutputError(f"{path}: folder is not writable")
            return path
        if path.is_dir():
            raise OutputError(f"{path}: is a folder, expected a file path")
        if not os.access(path, os.W_OK):
            raise OutputError(f"{path}: is read-only")
        if not _writable_dir(path.parent):
            raise OutputError(f"{path}: its folder {path.parent} is not writable")
        return path
    if not existing.is_dir():
        raise OutputError(f"{path}: {existing} is a file, not a folder")
    if not _writable_dir(existing):
        raise OutputError(f"{path}: folder {existing} is not writable")
    return path


def _ensure_parent(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        check_target(path)  # the precise reason, when it can name one
        raise OutputError(f"{path}: cannot create its folder ({_why(exc)})") from None


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new entry in `folder` durable (a no-op where dirs cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_via(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Atomically produce `path` with `write(tmp)`, a function that writes a whole file at the
    temporary path it is given (matplotlib's savefig, pandas' to_parquet, torch.save). The
    temporary file keeps the target's suffix, so format detection by suffix still works."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{path}: is a folder, expected a file path")
    _ensure_parent(path)
    try:
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                        suffix=f".tmp{path.suffix}")
    except OSError as exc:
        check_target(path)
        raise OutputError(f"{path}: cannot write ({_why(exc)})") from None
    tmp = Path(tmp_name)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        os.close(fd)
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:  # Ctrl-C included: never leave the temporary file
        with contextlib.suppress(OSError):
            os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise OutputError(f"{path}: cannot write ({_why(exc)})") from None
        raise
    fsync_dir(path.parent)
    return path


def atomic_write(path: str | Path, data: str | bytes) -> Path:
    """Write `data` (text as UTF-8, or bytes) to `path` atomically and durably."""
    payload = data.encode() if isinstance(data, str) else bytes(data)
    return write_via(path, lambda tmp: tmp.write_bytes(payload))


def write_json(path: str | Path, data, *, indent: int | None = 1) -> Path:
    """One JSON document (numbers as JSON allows: NaN and infinities are refused)."""
    try:
        text = json.dumps(data, indent=indent, default=str, allow_nan=False)
    except ValueError as exc:
        raise OutputError(f"{path}: cannot write a non-finite number as JSON ({exc})") from None
    return atomic_write(path, text + "\n")


def save_figure(fig, path: str | Path, fmt: str | None = None) -> Path:
    """A matplotlib Figure saved atomically (a torn SVG or PNG is never left behind)."""
    path = Path(path)
    fmt = fmt or path.suffix.lstrip(".") or "png"
    return write_via(path, lambda tmp: fig.savefig(tmp, format=fmt))


# -- folders of several files ----------------------------------------------------------------

def is_complete(folder: str | Path) -> bool:
    """Whether `folder` holds a completion marker (written after every other file)."""
    return (Path(folder) / MARKER).is_file()


def mark_complete(folder: str | Path, kind: str) -> Path:
    """Write the folder's completion marker last: its kind, when it finished and the files it
    holds (relative paths)."""
    folder = Path(folder)
    return write_json(folder / MARKER, {"kind": kind, "complete": True,
                                        "files": files_under(folder),
                                        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})


def files_under(folder: Path) -> list[str]:
    """Every regular file under `folder` (relative, sorted), the marker and temporaries aside."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.is_file() and p.name != MARKER and ".tmp" not in p.name)


def check_folder(folder: str | Path, owned: Iterable[str]) -> Path:
    """Raise OutputError unless `folder` can be (re)written by a command whose files are
    `owned` (names or glob patterns at the folder's top: files or subfolders): it can be
    created, or it exists and holds nothing else. Changes nothing; call it before long work."""
    folder = check_target(folder, folder=True)
    owned = set(owned) | {MARKER}
    if folder.is_dir():
        foreign = [e for e in sorted(os.listdir(folder))
                   if not any(fnmatch.fnmatchcase(e, pat) for pat in owned) and ".tmp" not in e]
        if foreign:
            raise OutputError(f"{folder}: exists and holds {foreign[0]!r}, which this command "
                              "does not write; choose a new --out or empty it")
    return folder


def prepare_folder(folder: str | Path, owned: Iterable[str]) -> Path:
    """Make `folder` ready to be (re)written by a command whose files are `owned` (see
    check_folder, which refuses a folder holding anything else: heterps never deletes files
    it did not write). An absent folder is created. An existing one loses its completion marker
    first (so it never looks complete while being rewritten), then the owned entries a previous
    run left (stale plans, figures, temporaries)."""
    folder = check_folder(folder, owned)
    if folder.is_dir():
        entries = sorted(os.listdir(folder))
        try:
            if MARKER in entries:
                (folder / MARKER).unlink()
                fsync_dir(folder)
            for entry in entries:
                p = folder / entry
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                elif os.path.lexists(p):
                    p.unlink()
        except OSError as exc:
            raise OutputError(f"{folder}: cannot clear the previous run's files "
                              f"({_why(exc)})") from None
        return folder
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{folder}: cannot create the folder ({_why(exc)})") from None
    return folder
