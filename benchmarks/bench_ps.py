"""Parameter-server goals: pull rows/s end to end, and hot-tier hit rate vs Belady.

1. Throughput: `ps-bench` at the goal's point (10,000,000 rows, dim 16, Zipf 1.05, hot tier
   5%, batch 4096) with 1 and 2 PS ranks; goal >= 2,000,000 pulled rows/s, one pull at a
   time and with --window pulls in flight, each reported next to raw gloo point-to-point with
   the same number in flight, measured in the same run (`uptime` printed with it: the load).
2. Hit rates: one long stream per Zipf exponent (--stream-ids ids, 10,000,000 rows) replayed
   through every policy at 5% and 1% hot tiers, next to Belady's optimum (goal: within
   5 points) and next to a cache holding the true top-k ids forever (what an online policy
   can expect on an i.i.d. stream). A replay is the server's own tier code (tests prove the
   counts are equal).

    python benchmarks/bench_ps.py [--json] [--quick] [--stream-ids 10000000] [--window 4]
                                  [--quantize none|fp16|bf16|int8] [--only throughput|hit-rates]
"""

from __future__ import annotations

import argparse
import json
import os
import time

from heterps_exec.ps.bench import run_bench
from heterps_exec.ps.spec import POLICIES, QUANTIZE
from heterps_sim.tiers.replay import (
    belady_hit_rate,
    replay_hit_rates,
    static_hit_rate,
    zipf_ids,
    zipf_top_ids,
)

ROWS, BATCH = 10_000_000, 4096


def throughput(rows: int, batches: int, window: int, quantize: str) -> list[dict]:
    out = []
    for shards in (1, 2):
        load = os.getloadavg()[0]
        r = run_bench(rows=rows, dim=16, zipf=1.05, hot_fraction=0.05, warm_fraction=0.2,
                      policy="lfu", batch=BATCH, shards=shards, batches=batches, window=window,
                      quantize=quantize)
        r.pop("servers")
        r["load_before"], r["load_after"] = load, os.getloadavg()[0]
        out.append(r)
        print(f"shards {shards}: pull {r['pull_rows_per_s']:,.0f} rows/s (raw gloo "
              f"{r['raw_p2p_rows_per_s']:,.0f}, x{r['pull_vs_raw_p2p']:.2f}); {window} in flight "
              f"{r['pull_window_rows_per_s']:,.0f} (raw gloo {r['raw_p2p_window_rows_per_s']:,.0f}"
              f", x{r['pull_window_vs_raw_p2p_window']:.2f}); push {r['push_rows_per_s']:,.0f}; "
              f"EmbeddingBag {r['embedding_bag_rows_per_s']:,.0f}; quantize {quantize}; "
              f"load {load:.1f} -> {r['load_after']:.1f}", flush=True)
    return out


def hit_rates(rows: int, stream_ids: int) -> list[dict]:
    out = []
    for alpha in (1.05, 1.2):
        ids = zipf_ids(stream_ids, rows, alpha, seed=0)
        for frac in (0.05, 0.01):
            hot = int(rows * frac)
            t0 = time.perf_counter()
            row = {"zipf": alpha, "hot_fraction": frac, "belady": belady_hit_rate(
                ids, hot, batch_size=BATCH), "static_top_k": static_hit_rate(
                ids, zipf_top_ids(rows, hot), batch_size=BATCH)}
            for policy in POLICIES:
                row[policy] = replay_hit_rates(ids, policy, hot, batch_size=BATCH)["hot"]
            row["seconds"] = time.perf_counter() - t0
            out.append(row)
            gaps = ", ".join(f"{p} {100 * row[p]:.1f}% ({100 * (row['belady'] - row[p]):+.1f})"
                             for p in POLICIES)
            print(f"Zipf {alpha}, hot {frac:.0%}: Belady {100 * row['belady']:.1f}%, true top-k "
                  f"held forever {100 * row['static_top_k']:.1f}%; {gaps}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="1M rows, short runs (a smoke test)")
    ap.add_argument("--stream-ids", type=int, default=10_000_000)
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--window", type=int, default=4, help="pulls in flight (default 4)")
    ap.add_argument("--quantize", default="none", choices=QUANTIZE)
    ap.add_argument("--only", choices=("throughput", "hit-rates"), default=None)
    args = ap.parse_args()
    rows = 1_000_000 if args.quick else ROWS
    stream = 200_000 if args.quick else args.stream_ids
    batches = 20 if args.quick else args.batches
    result = {}
    if args.only != "hit-rates":
        result["throughput"] = throughput(rows, batches, args.window, args.quantize)
    if args.only != "throughput":
        result["hit_rates"] = hit_rates(rows, stream)
    if args.json:
        print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
