"""One run per checkpoint directory: an exclusive lock held for the life of the run.

    with hold(ckpt_dir) as lock:          # ExecError (exit 2) when another run holds it
        launch(spec, opts, keep_fds=lock.fds)

The lock is `fcntl.flock` on DIR/.lock; the kernel drops it when every process holding the
open file has exited, so a crashed run never leaves a stale lock behind, and torchrun, which
inherits the file, keeps it until the run's last process is gone. The file names the pid that
holds it, for the message a second run prints.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from heterps_exec.request import ExecError

LOCK_NAME = ".lock"


@dataclass(frozen=True, slots=True)
class DirLock:
    path: Path
    fd: int

    @property
    def fds(self) -> tuple[int, ...]:
        return (self.fd,)


@contextlib.contextmanager
def hold(directory: str | Path, flag: str = "--checkpoint-dir"):
    """Create `directory` if needed and lock it exclusively; yields a DirLock (None for "")."""
    if not directory:
        yield None
        return
    path = Path(directory)
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(path / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise ExecError(f"{flag}: {directory}: cannot create or lock it ({exc.strerror})") \
            from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise ExecError(f"{flag}: {directory} is in use by another run (pid {holder}); "
                            "wait for it to end or use another directory") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield DirLock(path, fd)
    finally:
        os.close(fd)  # drops our hold; an inheriting torchrun keeps it until it exits
