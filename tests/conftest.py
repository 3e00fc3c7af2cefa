"""Test settings: hypothesis is derandomized so CI is deterministic (same examples each run).

Set HYPOTHESIS_PROFILE=explore to draw fresh random examples while developing.
"""

import os
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("default", derandomize=True)
settings.register_profile("explore", derandomize=False, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


SLOW_LIST = Path(__file__).with_name("slow_tests.txt")


def _listed_slow() -> set[str]:
    """Node ids in tests/slow_tests.txt (its comments say how they were chosen)."""
    ids = set()
    for line in SLOW_LIST.read_text().splitlines():
        node = line.split("  #")[0].strip()
        if node and not node.startswith("#"):
            ids.add(node)
    return ids


@pytest.hookimpl(tryfirst=True)  # before `-m 'not slow'` deselects by the marks
def pytest_collection_modifyitems(config, items):
    listed = _listed_slow()
    for item in items:
        if item.nodeid in listed:
            item.add_marker(pytest.mark.slow)



@pytest.fixture(scope="session", autouse=True)
def _own_capture_cache(tmp_path_factory):
    """The session's own capture cache (heterps_sim/inputs/torch_model/cache.py), inherited by
    the commands tests start: user models are captured afresh, never read from (or written
    to) the developer's ~/.cache/heterps."""
    before = os.environ.get("HETERPS_CACHE_DIR")
    os.environ["HETERPS_CACHE_DIR"] = str(tmp_path_factory.mktemp("heterps-cache"))
    yield
    if before is None:
        os.environ.pop("HETERPS_CACHE_DIR", None)
    else:
        os.environ["HETERPS_CACHE_DIR"] = before
