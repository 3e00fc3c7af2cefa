"""Schedulers: type-assignment search over the shared cost model (see base.py)."""
