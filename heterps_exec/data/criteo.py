"""The Criteo text layout, parsed block by block with numpy (no per-row Python).

    label \\t I1 .. I13 \\t C1 .. C26 \\n        (Kaggle train.txt, Terabyte day_N: no header)

A block of whole lines becomes one `Chunk`: the good rows' columns ("label" 0/1 as float32,
"I1".."I13" as float64, "C1".."C26" as uint64 values of the hex strings) plus the count and
the first few of the malformed lines. Missing values are what Criteo users expect: an empty
integer is 0, an empty categorical is the value 0 (both as in DLRM's preprocessing). A line is
malformed when it has other than 40 fields (a blank line too), a label other than 0/1, an
integer field that is not an optionally signed decimal of at most 18 digits, or a categorical
that is not hex of at most 16 digits. Lines may end in \\n or \\r\\n; a file ending in .gz is
read through gzip.

How: the bytes of a block are one uint8 array; tab and newline positions give every field's
[start, end); each column group is decoded right-aligned in one gather over [rows, columns,
digits] with a lookup table (invalid characters flag the row).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

NUM_INT, NUM_CAT = 13, 26
INT_COLUMNS = tuple(f"I{i}" for i in range(1, NUM_INT + 1))
CAT_COLUMNS = tuple(f"C{i}" for i in range(1, NUM_CAT + 1))
COLUMNS = ("label", *INT_COLUMNS, *CAT_COLUMNS)
NUM_FIELDS = len(COLUMNS)
MAX_DEC_DIGITS = 15
"""Integer fields longer than this are malformed (15 digits stay exact in float64)."""
MAX_EXAMPLES = 5
"""Malformed lines kept as examples per chunk (all of them are counted)."""

_TAB, _NL, _CR, _MINUS = 9, 10, 13, 45
_BAD = 255
_PAD = 16
_DEC = np.full(256, _BAD, np.uint8)
_DEC[48:58] = np.arange(10)
_HEX = _DEC.copy()
_HEX[97:103] = np.arange(10, 16)  # a-f
_HEX[65:71] = np.arange(10, 16)  # A-F


@dataclass(slots=True)
class Chunk:
    """Good rows of a block as named columns, and what was wrong with the others."""

    columns: dict[str, np.ndarray]
    lines: int
    """Lines consumed (good + malformed)."""
    bad: int = 0
    examples: list[str] = field(default_factory=list)
    """"line N: why" for the first malformed lines."""

    @property
    def num_rows(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0


def _digits(la: np.ndarray, fs: np.ndarray, fe: np.ndarray,
            width: int) -> tuple[np.ndarray, np.ndarray]:
    """Digit values of fields [fs, fe) right-aligned in `width` places ([..., width] uint8,
    0 left of the field) and the fields' bad flags. `la` is the block through a digit lookup
    table (_BAD outside it), padded with `width` bytes in front so no gather needs a check."""
    length = fe - fs
    k = np.arange(width - 1, -1, -1, dtype=fs.dtype)  # places, most significant first
    d = la[fe[..., None] - 1 - k]
    inside = k < length[..., None]
    bad = ((d == _BAD) & inside).any(-1)
    d *= inside & (d != _BAD)
    return d, bad


def _hex(la, fs, fe) -> tuple[np.ndarray, np.ndarray]:
    """Hex fields (<= 16 digits) as uint64, and bad flags."""
    length = fe - fs
    if np.all((length == 8) | (length == 0)):  # Criteo's own layout: one gather, no masks
        d = la[fs[..., None] + np.arange(8, dtype=fs.dtype)]
        full = length == 8
        bad = full & (d == _BAD).any(-1)
        packed = (d[..., 0::2] << 4) | (d[..., 1::2] & 15)
        values = np.ascontiguousarray(packed).view(">u4")[..., 0].astype(np.uint64)
        return values * full, bad
    width = 8 if int(length.max(initial=0)) <= 8 else 16
    d, bad = _digits(la, fs, fe, width)
    bad |= length > 16
    packed = (d[..., 0::2] << 4) | d[..., 1::2]  # two digits per byte, big-endian
    values = np.ascontiguousarray(packed).view(f">u{width // 2}")[..., 0]
    return values.astype(np.uint64), bad


def _dec(la, fs, fe) -> tuple[np.ndarray, np.ndarray]:
    """Decimal fields (<= 15 digits, exact in float64) as float64, and bad flags."""
    longest = int((fe - fs).max(initial=0))
    width = max(1, min(longest, MAX_DEC_DIGITS))
    d, bad = _digits(la, fs, fe, width)
    bad |= fe - fs > MAX_DEC_DIGITS
    return d.astype(np.float64) @ (10.0 ** np.arange(width - 1, -1, -1)), bad


def parse_block(buf: bytes | memoryview, first_line: int = 1) -> Chunk:
    """Parse whole lines (`buf` ends with a newline, or is the file's unterminated last line)."""
    raw = np.frombuffer(buf, np.uint8)
    if not len(raw):
        return Chunk({}, 0)
    a = np.zeros(_PAD + len(raw) + 1 + _PAD, np.uint8)  # the gathers' padding both sides
    a[_PAD:_PAD + len(raw)] = raw
    a[_PAD + len(raw)] = _NL  # a newline for an unterminated last line (else padding)
    if raw[-1] == _NL:
        a[_PAD + len(raw)] = 0
    index = np.int32 if len(a) < 2**31 else np.int64
    ends = np.flatnonzero(a == _NL).astype(index)
    n = len(ends)
    starts = np.empty(n, index)
    starts[0], starts[1:] = _PAD, ends[:-1] + 1
    tabs = np.flatnonzero(a == _TAB).astype(index)
    upto = np.searchsorted(tabs, ends)
    first = np.concatenate([[0], upto[:-1]])
    ntabs = upto - first
    well = np.flatnonzero(ntabs == NUM_FIELDS - 1)
    t = tabs[first[well][:, None] + np.arange(NUM_FIELDS - 1)]
    fs = np.concatenate([starts[well][:, None], t + 1], axis=1)
    fe = np.concatenate([t, ends[well][:, None]], axis=1)
    last = fe[:, -1]
    fe[:, -1] = last - ((last > fs[:, -1]) & (a[np.maximum(last - 1, 0)] == _CR))

    label_ok = (fe[:, 0] - fs[:, 0] == 1) & ((a[fs[:, 0]] == 48) | (a[fs[:, 0]] == 49))
    ifs, ife = fs[:, 1:1 + NUM_INT], fe[:, 1:1 + NUM_INT]
    neg = (ife > ifs) & (a[np.minimum(ifs, len(a) - 1)] == _MINUS)
    ints, ibad = _dec(_DEC[a], ifs + neg, ife)
    ibad |= neg & (ife - ifs == 1)  # a lone "-"
    cats, cbad = _hex(_HEX[a], fs[:, 1 + NUM_INT:], fe[:, 1 + NUM_INT:])
    good = label_ok & ~ibad.any(1) & ~cbad.any(1)

    rows = well[good]
    values = ints[good]
    values[neg[good]] *= -1
    columns = {"label": (a[fs[good, 0]] == 49).astype(np.float32)}
    columns.update({c: values[:, j] for j, c in enumerate(INT_COLUMNS)})
    columns.update({c: cats[good, j] for j, c in enumerate(CAT_COLUMNS)})
    bad_total = n - len(rows)
    examples = _examples(ntabs, well, good, label_ok, ibad, cbad, first_line) if bad_total else []
    return Chunk(columns, n, bad_total, examples)


def _examples(ntabs, well, good, label_ok, ibad, cbad, first_line: int) -> list[str]:
    out = []
    for i in np.flatnonzero(ntabs != NUM_FIELDS - 1)[:MAX_EXAMPLES]:
        out.append((int(i), f"line {first_line + int(i)}: expected {NUM_FIELDS} tab-separated "
                            f"fields, got {int(ntabs[i]) + 1}"))
    for j in np.flatnonzero(~good)[:MAX_EXAMPLES]:
        why = ("label: expected 0 or 1" if not label_ok[j] else
               f"{INT_COLUMNS[int(np.argmax(ibad[j]))]}: not an integer" if ibad[j].any() else
               f"{CAT_COLUMNS[int(np.argmax(cbad[j]))]}: not a hex value")
        out.append((int(well[j]), f"line {first_line + int(well[j])}: {why}"))
    return [text for _, text in sorted(out)[:MAX_EXAMPLES]]


def open_text(path: str | Path):
    """The file as bytes, decompressed on the fly when it ends in .gz (Terabyte's day_N.gz)."""
    if str(path).endswith(".gz"):
        import gzip
        return gzip.open(path, "rb")
    return open(path, "rb")


def count_lines(path: str | Path, block_bytes: int = 16 << 20) -> int:
    """Lines of a text file (a last line without a newline counts), in one bounded pass."""
    n, last = 0, b"\n"
    with open_text(path) as fh:
        while block := fh.read(block_bytes):
            n += block.count(b"\n")
            last = block[-1:]
    return n + (last != b"\n")


def read_chunks(path: str | Path, *, block_bytes: int = 4 << 20, start_line: int = 0,
                stop_line: int | None = None) -> Iterator[Chunk]:
    """Chunks of lines [start_line, stop_line) (0-based; None: to the end), in file order.

    Memory: one block of about `block_bytes` of text (a line longer than that is read whole)
    and its parsed columns."""
    line = 0
    with open_text(path) as fh:
        carry = b""
        while stop_line is None or line < stop_line:
            block = fh.read(block_bytes)
            data = carry + block
            if not data:
                return
            cut = data.rfind(b"\n") + 1 if block else len(data)
            if cut == 0:  # no newline yet: a very long line, read on
                carry = data
                continue
            whole, carry = data[:cut], data[cut:]
            nlines = whole.count(b"\n") + (not whole.endswith(b"\n"))
            lo = max(start_line - line, 0)
            hi = nlines if stop_line is None else min(nlines, stop_line - line)
            if lo < hi:
                part = memoryview(whole) if (lo, hi) == (0, nlines) else _lines(whole, lo, hi)
                yield parse_block(part, first_line=line + lo + 1)
            line += nlines
            if not block:
                return


def _lines(buf: bytes, lo: int, hi: int) -> memoryview:
    """Lines lo..hi-1 (0-based) of buf."""
    ends = np.flatnonzero(np.frombuffer(buf, np.uint8) == _NL)
    begin = 0 if lo == 0 else int(ends[lo - 1]) + 1
    end = int(ends[hi - 1]) + 1 if hi - 1 < len(ends) else len(buf)
    return memoryview(buf)[begin:end]
