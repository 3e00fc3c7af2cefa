"""Progress for the commands that take a while: one status line per phase ("fine-tuning the
policy...") and tqdm bars, always on stderr, so `--json` output and piped tables on stdout
stay byte for byte what they would be without it.

Shown only where someone watches: when stderr is a terminal. `--quiet` turns it off
(`configure(False)`); the environment variable HETERPS_PROGRESS=1 turns it on where stderr is
not a terminal (a log file), HETERPS_PROGRESS=0 off. Library code calls `phase`, `bar` and
`clock`; each does nothing when progress is off. Inside a step that has its own bar (a sweep's
points), `inner()` hides the phases of the work it repeats; `notice` lines (the one-off
"compiling the cost kernels") still show.

    progress.phase("rl: decoding 513 plans")          # "rl: decoding 513 plans..."
    for plan in progress.bar(starts, desc="polish", unit="start"): ...
    with progress.clock(10.0, "rl: fine-tuning") as tick: tick(elapsed_s, updates=n)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

ENV = "HETERPS_PROGRESS"
"""1/on: show progress even where stderr is not a terminal; 0/off: never."""

_show: bool | None = None
"""Set by the CLIs (`--quiet`: False); None decides by ENV, then by the terminal."""
_inner = 0
"""Depth of `inner()` blocks: phases and bars hidden while > 0."""


def configure(show: bool | None) -> None:
    """True: always show; False: never (--quiet); None: by HETERPS_PROGRESS, else whether
    stderr is a terminal."""
    global _show
    _show = show


@contextmanager
def showing(show: bool | None) -> Iterator[None]:
    """`configure(show)` for the block, the earlier setting put back after it."""
    global _show
    before, _show = _show, show
    try:
        yield
    finally:
        _show = before


@contextmanager
def inner() -> Iterator[None]:
    """Hide phases and bars inside the block (work repeated under an outer bar)."""
    global _inner
    _inner += 1
    try:
        yield
    finally:
        _inner -= 1


def enabled() -> bool:
    """Whether progress is shown at all (notices included)."""
    if _show is not None:
        return _show
    env = os.environ.get(ENV, "").strip().lower()
    if env in ("1", "on", "yes", "true", "always"):
        return True
    if env in ("0", "off", "no", "false", "never"):
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


def _phases_shown() -> bool:
    return _inner == 0 and enabled()


def _write(line: str) -> None:
    from tqdm import tqdm
    tqdm.write(line, file=sys.stderr)  # above any bar that is running
    sys.stderr.flush()


def phase(text: str) -> None:
    """One status line, "TEXT...", on stderr."""
    if _phases_shown():
        _write(f"{text}...")


def notice(text: str) -> None:
    """A one-off line shown even inside `inner()` (but never with --quiet or off a terminal)."""
    if enabled():
        _write(text)


def bar(iterable: Iterable | None = None, *, total: float | None = None, desc: str,
        unit: str, off: bool = False, **kwargs):
    """A tqdm bar on stderr (disabled when progress is off, or `off`); it leaves no line
    behind."""
    from tqdm import tqdm
    kwargs.setdefault("leave", False)
    return tqdm(iterable, total=total, desc=desc, unit=unit, file=sys.stderr,
                disable=off or not _phases_shown(), dynamic_ncols=True, **kwargs)


@contextmanager
def clock(seconds: float, desc: str) -> Iterator[Callable[..., None]]:
    """A bar over a wall-clock budget: `tick(elapsed_s, **postfix)` moves it to elapsed_s (no
    bar for a budget of 0 s)."""
    b = bar(total=float(seconds), desc=desc, unit="s", off=seconds <= 0,
            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s{postfix}")

    def tick(elapsed_s: float, **postfix) -> None:
        if b.disable:
            return
        b.n = min(float(elapsed_s), b.total)
        if postfix:
            b.set_postfix(postfix, refresh=False)
        b.refresh()

    try:
        yield tick
    finally:
        b.close()
