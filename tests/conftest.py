"""Test settings: hypothesis is derandomized so CI is deterministic (same examples each run).

Set HYPOTHESIS_PROFILE=explore to draw fresh random examples while developing.
"""

import os

from hypothesis import settings

settings.register_profile("default", derandomize=True)
settings.register_profile("explore", derandomize=False, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
