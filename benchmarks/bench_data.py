"""Criteo-format reader throughput on this machine, with pandas' C parser as the yardstick.

A file of ROWS Criteo-format lines (examples/make_criteo_sample.py's generator, 0.05% of
them malformed) is written once; then, REPEATS times each, timed with perf_counter over the
whole pass, single process, data in the page cache after the first write:
- parse: heterps_exec.data.criteo.read_chunks (text -> label, 13 counts, 26 hex values);
- stream: the engine's whole reader (RowStream): parse + hash the 26 categoricals into the
  26 tables of dlrm + log1p of the counts + cutting global batches of 4096 rows, the
  batches a run's stage-0 rank trains on;
- pandas: pd.read_csv(sep="\\t", header=None, dtype=str) of the same file, parsing only
  (no hex decoding, no hashing): the usual way, as a yardstick measured in the same run.
rows/s = lines in the file / seconds of the pass, by the wall clock and by the process's CPU
time (all three are single-threaded, so on an idle machine the two agree; on a shared,
overloaded VM the wall clock measures the neighbours, the CPU time still the reader). The
medians are printed with the load average, and the ratios to pandas.

    python benchmarks/bench_data.py [--rows 300000] [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd

from heterps_exec.data.columns import resolve
from heterps_exec.data.criteo import CAT_COLUMNS, COLUMNS, INT_COLUMNS, read_chunks
from heterps_exec.data.criteo_sample import write_criteo_sample
from heterps_exec.data.readers import row_stream
from heterps_exec.data.synthetic import raw_tensors
from heterps_sim.inputs.zoo import model_graph

TARGET_ROWS_PER_S = 200_000


def _timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one call."""
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=300_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    raw = raw_tensors(model_graph("dlrm"))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "day.tsv"
        write_criteo_sample(path, rows=args.rows, seed=0, bad_rows=args.rows // 2000)
        spec = {"format": "criteo", "path": str(path), "holdout_path": "",
                "train_rows": args.rows, "holdout_rows": 0, "block_bytes": 4 << 20,
                "columns": resolve(raw, {}, COLUMNS, numeric=INT_COLUMNS,
                                   categorical=CAT_COLUMNS),
                "hash_seed": 0, "shuffle_rows": 0, "dense_transform": "log1p"}

        def parse():
            for _ in read_chunks(path):
                pass

        def stream():
            s = row_stream(spec, raw, batch_size=4096, seed=0)
            s.endless = False
            for _ in s.batches():
                pass

        def pandas():
            pd.read_csv(path, sep="\t", header=None, names=COLUMNS, dtype=str,
                        keep_default_na=False, on_bad_lines="skip")

        times = {name: [_timed(fn) for _ in range(args.repeats)]
                 for name, fn in [("parse", parse), ("stream", stream), ("pandas", pandas)]}
        size = path.stat().st_size
    wall = {k: args.rows / statistics.median(t[0] for t in v) for k, v in times.items()}
    cpu = {k: args.rows / statistics.median(t[1] for t in v) for k, v in times.items()}
    out = {"rows": args.rows, "file_bytes": size, "repeats": args.repeats,
           "load_average_1min": os.getloadavg()[0], "cpu_count": os.cpu_count(),
           "rows_per_s_wall": wall, "rows_per_cpu_s": cpu,
           "ratio_to_pandas_wall": {k: wall[k] / wall["pandas"] for k in ("parse", "stream")},
           "target_rows_per_s": TARGET_ROWS_PER_S,
           "stream_meets_target": {"wall": wall["stream"] >= TARGET_ROWS_PER_S,
                                   "cpu": cpu["stream"] >= TARGET_ROWS_PER_S}}
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"{args.rows:,} lines, {size / 1e6:.0f} MB, median of {args.repeats}; "
          f"load average {out['load_average_1min']:.1f} on {out['cpu_count']} cores")
    print(f"{'':>7}  {'rows/s (wall)':>14}  {'rows/CPU-s':>11}  wall vs pandas")
    for k in wall:
        ratio = f"{wall[k] / wall['pandas']:.2f}x" if k != "pandas" else ""
        print(f"{k:>7}  {wall[k]:>14,.0f}  {cpu[k]:>11,.0f}  {ratio:>8}")
    ok = out["stream_meets_target"]
    print(f"stream >= {TARGET_ROWS_PER_S:,} rows/s: wall {'yes' if ok['wall'] else 'no'}, "
          f"CPU time {'yes' if ok['cpu'] else 'no'}")


if __name__ == "__main__":
    main()
