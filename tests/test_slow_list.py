"""tests/slow_tests.txt names tests that exist: a renamed or deleted test would otherwise drop
out of the list silently and come back into the default suite's time."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import _listed_slow

ROOT = Path(__file__).resolve().parents[1]


def test_every_listed_slow_test_exists():
    listed = _listed_slow()
    assert len(listed) >= 50
    for node in sorted(listed):
        path, _, rest = node.partition("::")
        function = rest.split("[")[0]
        assert (ROOT / path).is_file(), node
        assert f"def {function}(" in (ROOT / path).read_text(), node
