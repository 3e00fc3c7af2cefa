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


MAX_SEED = 2**32 - 1
"""Seeds are integers in 0..MAX_SEED on every command of both CLIs: numpy's legacy generator
takes no more, and numpy refuses negative seeds (torch would take them, so a negative seed
would seed the weights and not the data): one range everywhere, checked at the flag."""
MAX_SLOWDOWN = 1000.0
"""Largest factor an emulated slow unit (--slow-replica STAGE:REPLICA:F) or a binding's
emulated speed may dilate compute by: a unit 1000x slower is already off any real chart, and
1e300 overflowed time.sleep in a rank after the run had started."""


# The ranges every number of a problem must lie in (inputs/bounds.py checks them where a
# scenario or problem JSON is loaded). Each is far outside any real figure and far inside what
# the cost model's float64 arithmetic survives: a price of 1e-308 USD/h or a network of
# 1e-308 Gbit/s passed as finite numbers and overflowed a square or a ceil deep in a scheduler.
MAX_NUM_SAMPLES = 1e15
"""Samples x epochs of a workload: 31 years at a million samples/s."""
MIN_RATE = 1e-6
"""Smallest throughput limit, samples/s (batch / limit must stay a finite number of seconds)."""
MAX_THROUGHPUT = 1e12
"""Largest throughput limit, samples/s."""
MIN_PRICE_PER_HOUR, MAX_PRICE_PER_HOUR = 1e-6, 1e6
"""USD per unit-hour (0 is allowed: hardware you already own)."""
MIN_BYTES_PER_S, MAX_BYTES_PER_S = 1e3, 1e15
"""A link, network or tier bandwidth: 8 kbit/s to 8 Pbit/s."""
MAX_LATENCY_S = 60.0
"""A per-message latency."""
MAX_BYTES = 1e15
"""A layer's parameters, state, boundary or per-sample bytes; a unit's memory (1 PB)."""
MIN_MEMORY_BYTES = 1e6
"""A unit's memory (1 MB); a smaller one turns memory provisioning into huge unit counts."""
MAX_SECONDS = 1e6
"""A per-batch compute or transfer time, a fixed overhead, a start-up or billing granule
(11.6 days)."""


def seed_problem(value, flag: str = "--seed") -> str | None:
    """A line saying why `value` is not a seed (see MAX_SEED), or None."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SEED:
        return None
    return f"{flag}: expected an integer in 0..{MAX_SEED:,}, got {value}"


def memory_bytes() -> int:
    """This machine's physical memory (what a benchmark's in-memory tables must fit in)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 * 2**30


def gib(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:.1f} GiB"


def available_memory_bytes() -> int:
    """Memory this machine can give a new job now without swapping: the kernel's MemAvailable
    (free memory plus the page cache it can drop), else free pages, else the physical memory."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError):
        return memory_bytes()


def cpu_cores() -> int:
    """Cores this process may run on (its affinity mask: a container's or taskset's share)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return max(os.cpu_count() or 1, 1)
