"""`heterps-exec` for the engine benchmarks: the command in a child process, its output kept.

Imported by the benchmark scripts as a sibling module (a script's own folder is on sys.path).
"""

from __future__ import annotations

import subprocess
import sys


def run_exec(*args: str, timeout_s: float = 1800) -> tuple[int, str, str]:
    """`python -m heterps_exec.cli ARGS`: (exit code, stdout, stderr)."""
    done = subprocess.run([sys.executable, "-m", "heterps_exec.cli", *args], capture_output=True,
                          text=True, timeout=timeout_s)
    return done.returncode, done.stdout, done.stderr
