"""The Criteo block parser against a line-by-line Python reading of the same text, on
random lines mixing good fields with every kind of bad one (hypothesis)."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from heterps_exec.data.criteo import CAT_COLUMNS, INT_COLUMNS, parse_block

INT = re.compile(r"-?[0-9]{1,15}")
HEX = re.compile(r"[0-9a-fA-F]{1,16}")


def python_rows(text: str):
    """(good rows as (label, ints, hexes), number of bad lines), by str.split and re."""
    good, bad = [], 0
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for line in lines:
        line = line[:-1] if line.endswith("\r") else line
        f = line.split("\t")
        ok = (len(f) == 40 and f[0] in ("0", "1")
              and all(v == "" or INT.fullmatch(v) for v in f[1:14])
              and all(v == "" or HEX.fullmatch(v) for v in f[14:]))
        if not ok:
            bad += 1
            continue
        good.append((int(f[0]), [int(v or "0") for v in f[1:14]],
                     [int(v or "0", 16) for v in f[14:]]))
    return good, bad


BAD_INTS = ["-", "1.5", "x", "+3", "1" * 16, " 4"]
BAD_HEXES = ["g1", "0x1f", "1" * 17, "é"]


def field(good, bad):
    """A good value most of the time (so that many lines are good), now and then a bad one."""
    return st.integers(0, 99).flatmap(lambda r: st.sampled_from(bad) if r < 2 else good)


int_field = field(st.one_of(st.just(""), st.integers(-10**14, 10**15 - 1).map(str)), BAD_INTS)
hex_field = field(st.one_of(st.just(""), st.integers(0, 2**32 - 1).map(lambda v: f"{v:08x}"),
                            st.integers(0, 2**64 - 1).map(lambda v: f"{v:X}")), BAD_HEXES)
label = st.sampled_from(["0", "1"] * 10 + ["2", "", "01"])


@st.composite
def line(draw):
    fields = [draw(label)] + [draw(int_field) for _ in range(13)] + \
        [draw(hex_field) for _ in range(26)]
    cut = draw(st.sampled_from([None] * 18 + [5, 41]))
    if cut == 5:
        fields = fields[:5]
    elif cut == 41:
        fields = fields + ["7"]
    return "\t".join(fields) + draw(st.sampled_from(["", "", "", "\r"]))


@settings(max_examples=80, deadline=None)
@given(st.lists(line(), min_size=1, max_size=30), st.booleans())
def test_parser_equals_a_line_by_line_reading(lines, final_newline):
    text = "\n".join(lines) + ("\n" if final_newline else "")
    want, want_bad = python_rows(text)
    chunk = parse_block(text.encode())
    assert chunk.lines == len(lines) and chunk.bad == want_bad
    assert chunk.num_rows == len(want)
    if want:
        assert chunk.columns["label"].tolist() == [float(r[0]) for r in want]
        ints = np.stack([chunk.columns[c] for c in INT_COLUMNS], 1)
        assert ints.tolist() == [[float(v) for v in r[1]] for r in want]
        cats = np.stack([chunk.columns[c] for c in CAT_COLUMNS], 1)
        assert cats.tolist() == [r[2] for r in want]
