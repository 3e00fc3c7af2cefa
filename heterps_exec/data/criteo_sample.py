"""A small Criteo-format file drawn from a seed, for tests, benchmarks and the docs.

    write_criteo_sample("sample.tsv", rows=10_000, seed=0)       # same seed, same bytes

Not real Criteo data (nothing is downloaded): the layout is the real one (label, 13 integer
counts, 26 hex categoricals, tab-separated) and so are its quirks (empty fields for missing
values, heavy-tailed counts, Zipf-distributed categories of very different cardinalities,
about a quarter positives). The labels depend on a few columns through hidden weights, so a
model trained on the file scores a held-out slice above chance. `bad_rows` malformed lines of
four kinds (a missing field, label 2, a non-integer count, a non-hex category) are put at
random lines; their line numbers are returned, so tests know exactly what a reader must skip.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from heterps_exec.data.criteo import NUM_CAT, NUM_INT
from heterps_exec.data.synthetic import zipf_ids

CARDINALITIES = (1460, 583, 10_000, 5_000, 305, 24, 10_000, 633, 3, 9_000, 5_000, 10_000, 3_000,
                 27, 10_000, 8_000, 10, 5_000, 2_000, 4, 10_000, 18, 15, 10_000, 104, 10_000)
"""Distinct values per categorical column (Criteo's, capped at 10,000 for a small file)."""
MISSING_INT = 0.2
MISSING_CAT = 0.05


def _labels(rng, ints, cats) -> np.ndarray:
    logit = -1.4 + 0.6 * (np.log1p(ints[:, :4]) - 1.5).sum(1)
    for j in range(6):  # a hidden weight per value of the first few categoricals
        logit += rng.normal(0, 1.2, CARDINALITIES[j])[cats[:, j]]
    return (rng.random(len(logit)) < 1 / (1 + np.exp(-logit))).astype(np.int64)


def write_criteo_sample(path: str | Path, *, rows: int, seed: int = 0,
                        bad_rows: int = 0) -> list[int]:
    """Write `rows` lines (bad_rows of them malformed); returns the malformed 1-based lines."""
    if rows < 1 or not 0 <= bad_rows <= rows:
        raise ValueError(f"need rows >= 1 and 0 <= bad_rows <= rows, got {rows}, {bad_rows}")
    rng = np.random.default_rng([seed, 0xC817E0])
    ints = np.floor(rng.lognormal(1.0, 1.6, (rows, NUM_INT))).astype(np.int64)
    ints[:, 1] -= 2  # one count column has small negatives, as Criteo's I2 does
    cats = np.stack([zipf_ids(rng, c, (rows,), 1.1) for c in CARDINALITIES], axis=1)
    labels = _labels(rng, np.maximum(ints, 0), cats)
    vocab = [np.array([f"{v:08x}" for v in rng.integers(0, 2**32, c)]) for c in CARDINALITIES]
    int_missing = rng.random((rows, NUM_INT)) < MISSING_INT
    cat_missing = rng.random((rows, NUM_CAT)) < MISSING_CAT
    fields = [labels.astype(str).tolist()]
    for j in range(NUM_INT):
        col = ints[:, j].astype(str)
        col[int_missing[:, j]] = ""
        fields.append(col.tolist())
    for j in range(NUM_CAT):
        col = vocab[j][cats[:, j]].astype(object)
        col[cat_missing[:, j]] = ""
        fields.append(col.tolist())
    lines = ["\t".join(r) for r in zip(*fields)]
    bad = np.sort(rng.choice(rows, bad_rows, replace=False))
    for k, i in enumerate(bad):
        parts = lines[i].split("\t")
        kind = k % 4
        if kind == 0:
            parts.pop(5)
        elif kind == 1:
            parts[0] = "2"
        elif kind == 2:
            parts[3] = "12x"
        else:
            parts[20] = "zz0a"
        lines[i] = "\t".join(parts)
    Path(path).write_text("\n".join(lines) + "\n")
    return [int(i) + 1 for i in bad]
