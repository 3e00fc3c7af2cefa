"""Informational lines about a user model on stderr, each once per process; the capture
cache (cache.py) records the lines a capture says and says them again on a cache hit, so a
cached run prints what a captured one prints. No torch here."""

from __future__ import annotations

import sys
from contextlib import contextmanager

SAID: set[str] = set()
"""Lines already printed in this process."""
_recording: list[list[str]] = []


def say_once(line: str) -> None:
    """Print `line` on stderr unless this process printed it already."""
    for lines in _recording:
        lines.append(line)
    if line not in SAID:
        SAID.add(line)
        print(line, file=sys.stderr, flush=True)


@contextmanager
def recording():
    """The lines say_once is asked to print inside the block (printed or not)."""
    lines: list[str] = []
    _recording.append(lines)
    try:
        yield lines
    finally:
        _recording.remove(lines)
