"""How much memory a benchmark or profile asks for, checked before it allocates anything.

`ps-bench --batch 1000000000` or `profile` of a model with billion-row tables used to be
killed by the kernel minutes in; now the estimate is compared with the memory this machine
can give now (MemAvailable) first, and a request past it is one line naming the flag and the
limit (exit 2). The estimates count the big arrays only (tables, id streams, activations)
with measured multipliers (PROFILE_COPIES); `heterps-exec run` asks the same question of its
ranks (heterps_exec/launch/capacity.py).
"""

from __future__ import annotations

from heterps_sim.core.limits import MAX_BATCH, available_memory_bytes, gib

FLOAT = 4
ID = 8
PROFILE_COPIES = 10.0
"""Peak memory of `profile` per byte of a model's parameters and tables: measured 9.2x on
2emb (table scale 0.05 and 0.1, peak RSS 1.44 and 2.65 GiB here): the weights, the dense
gradient autograd accumulates over the timed backwards, the fresh one the optimizer timing
puts back, backward's temporaries, the optimizer's; rounded up."""
PROCESS_BYTES = 300 * 2**20
"""Python, torch and numpy before any table (measured: ~0.25 GiB here)."""


def _over_budget(need: float) -> float | None:
    budget = available_memory_bytes()
    return budget if need > budget else None


def ps_bench_problem(rows: int, dim: int, batch: int, batches: int, hot_fraction: float,
                     warm_fraction: float) -> str | None:
    """A line naming what is too big for `heterps-exec ps-bench`, or None. The bench holds the
    id stream, the in-process nn.EmbeddingBag ceiling (the whole table) and the hot and warm
    tiers in memory; the cold tier is a file."""
    if batch > MAX_BATCH:
        return f"--batch: at most {MAX_BATCH:,} ids per pull, got {batch:,}"
    if dim > 65536:
        return f"--dim: at most 65,536 floats per row, got {dim:,}"
    if rows >= 2**40:
        return f"--rows: at most {2**40 - 1:,}, got {rows:,}"
    table = float(rows) * dim * FLOAT
    need = table * (1 + hot_fraction + warm_fraction) + (batches + 4) * batch * ID * 3
    budget = _over_budget(need)
    if budget:
        return (f"--rows/--dim/--batch/--batches: the bench needs about {gib(need)} of memory "
                f"(tables {gib(table)} x (1 + hot + warm), id stream), more than the "
                f"{gib(budget)} this machine has available now")
    return None


def profile_problem(spec, batches: list[int]) -> str | None:
    """A line naming what is too big for `heterps-exec profile` of the ModelSpec `spec` at
    these batch sizes, or None: the model's parameters and tables (weights, gradients and
    temporaries: calibration/profiler.py keeps dense embedding gradients), and one batch's
    activations forward and backward."""
    largest = max(batches)
    if largest > MAX_BATCH:
        return f"--batch: at most {MAX_BATCH:,} samples, got {largest:,}"
    tables = sum(float(layer.table_rows) * layer.table_dim * FLOAT for layer in spec.layers)
    params = sum(float(layer.param_bytes) for layer in spec.layers)
    per_sample = sum(float(layer.input_bytes) + float(layer.output_bytes) for layer in spec.layers)
    need = PROFILE_COPIES * (tables + params) + 3 * largest * per_sample + PROCESS_BYTES
    budget = _over_budget(need)
    if budget:
        return (f"--model {spec.name} --batch {largest:,}: needs about {gib(need)} of memory "
                f"(tables {gib(tables)} x {PROFILE_COPIES:g} at the peak, activations "
                f"{gib(largest * per_sample)}), more than the {gib(budget)} this machine has "
                "available now; pass a smaller --table-scale or --batch")
    return None
