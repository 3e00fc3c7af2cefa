"""Held-out scoring: AUC and log-loss equal their definitions computed directly."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from heterps_exec.data.score import auc, log_loss
from tests.exec.data.oracle import auc_pairs, log_loss_direct


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(-5, 5)), min_size=2, max_size=60))
def test_auc_equals_the_pairwise_definition_with_ties(rows):
    labels = [y for y, _ in rows]
    scores = [s / 2 for _, s in rows]  # few distinct values: many ties
    got = auc(np.array(labels), np.array(scores))
    if 0 < sum(labels) < len(labels):
        assert abs(got - auc_pairs(labels, scores)) < 1e-12
    else:
        assert got is None


def test_auc_extremes_and_log_loss_against_probabilities():
    y = np.array([0, 0, 1, 1, 0, 1])
    z = np.array([-2.0, -1.0, 1.0, 3.0, 0.5, 0.2])
    assert auc(y, z) == auc_pairs(y, z) == 8 / 9
    assert abs(auc(y, -z) - 1 / 9) < 1e-15 and auc(y, np.zeros(6)) == 0.5
    assert abs(log_loss(y, z) - log_loss_direct(y, z)) < 1e-12
    rng = np.random.default_rng(0)
    y, z = rng.integers(0, 2, 5000), rng.normal(0, 3, 5000)
    assert abs(log_loss(y, z) - log_loss_direct(y, z)) < 1e-10
    assert log_loss([1], [800.0]) == 0.0 and np.isfinite(log_loss([0], [800.0]))
