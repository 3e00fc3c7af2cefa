"""Plumbing both packages use and the contract does not need: progress lines on a terminal
(progress.py) and where numba keeps the compiled kernels (numba_cache.py). It may import
heterps_sim.core only."""
