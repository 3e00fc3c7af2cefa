"""Independent re-statements of the documented data rules, for the tests' oracles (plain
Python ints, pandas; no code shared with heterps_exec.data)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

MASK = (1 << 64) - 1
CRITEO = ["label", *[f"I{i}" for i in range(1, 14)], *[f"C{i}" for i in range(1, 27)]]


def splitmix_row(value: int, rows: int, seed: int = 0) -> int:
    """The documented hash: SplitMix64's finaliser of value + golden * (seed + 1), mod rows."""
    z = (value + 0x9E3779B97F4A7C15 * (seed + 1)) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    z ^= z >> 31
    return z % rows


def read_criteo_pandas(path, skip_lines=()) -> pd.DataFrame:
    """The good rows of a Criteo file, read by pandas as strings (empty fields kept as "")."""
    skip = {i - 1 for i in skip_lines}
    return pd.read_csv(path, sep="\t", header=None, names=CRITEO, dtype=str,
                       keep_default_na=False, skiprows=lambda i: i in skip)


def criteo_tensors(df: pd.DataFrame, raw, hash_seed: int = 0) -> dict[str, np.ndarray]:
    """The model's raw tensors by the documented defaults: I1.. to features, C1.. to ids."""
    ints = [f"I{i}" for i in range(1, 14)]
    cats = [f"C{i}" for i in range(1, 27)]
    out = {}
    for t in raw:
        if t.role == "label":
            out[t.name] = df["label"].astype(float).to_numpy().reshape(-1, 1)
        elif t.role == "features":
            cols, ints = ints[:t.width], ints[t.width:]
            out[t.name] = np.array([[math.log1p(max(int(v or "0"), 0)) for v in r]
                                    for r in df[cols].itertuples(index=False)])
        else:
            cols, cats = cats[:t.width], cats[t.width:]
            out[t.name] = np.array([[splitmix_row(int(v or "0", 16), t.rows, hash_seed)
                                     for v in r] for r in df[cols].itertuples(index=False)])
    return out


def auc_pairs(labels, scores) -> float:
    """AUC by definition: over all (positive, negative) pairs, 1 if the positive scores
    higher, 1/2 on a tie."""
    pos = [s for y, s in zip(labels, scores) if y == 1]
    neg = [s for y, s in zip(labels, scores) if y == 0]
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def log_loss_direct(labels, logits) -> float:
    p = 1 / (1 + np.exp(-np.asarray(logits, np.float64)))
    y = np.asarray(labels, np.float64)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
