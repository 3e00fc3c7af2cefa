"""The largest sizes a user's input may ask for, in one place.

Each bound sits far above any real use and far below what would exhaust a machine: without
them, an 800-byte scenario asked for a billion microbatches (23 GB in the simulator) or a
30-digit number of units (an overflow in the cost kernels). A value past a bound is one line
of bad input naming the field and the limit. File-level bounds (bytes per input file, values
per YAML document once aliases expand) are in core/files.py next to the readers.
"""

from __future__ import annotations

import os

MAX_MICROBATCHES = 4096
"""Microbatches per training step (a plan's num_microbatches, the simulator's --microbatches):
the simulator keeps every microbatch of a step in flight."""
MAX_SIM_STEPS = 10_000
"""Training steps the simulator runs (--steps)."""
MAX_LAYERS = 10_000
"""Layers of a model (a synthetic chain's num_layers, a problem's layers)."""
MAX_TYPES = 4096
"""Resource types of a problem, synthetic variants included."""
MAX_SYNTHETIC_TYPES = 1024
"""Synthetic type variants a scenario may add (cluster.synthetic.count)."""
MAX_REPLICAS = 65536
"""Units of one stage in a plan (num_replicas, a replica group's count); the cost model's
provisioning search stops at the same number."""
MAX_UNITS = 1_000_000
"""Units of one type a cluster may have available (cluster.available.<type>)."""
MAX_BATCH = 1 << 22
"""Samples in one batch a benchmark or profile runs at once (about 4 M)."""


def memory_bytes() -> int:
    """This machine's physical memory (what a benchmark's in-memory tables must fit in)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 * 2**30


def gib(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:.1f} GiB"
