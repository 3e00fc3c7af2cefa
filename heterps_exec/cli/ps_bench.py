"""Measure the tiered parameter server end to end on a Zipf id stream.

Spawns PS ranks (--shards) and one client rank on this machine (gloo over loopback), pulls
--batches batches of --batch ids through them, then pushes the same batches, and reports
rows/s, the hit rate of every tier as the servers counted it, the same stream replayed
through the policy and through Belady's offline optimum, raw gloo point-to-point rows/s and
an in-process nn.EmbeddingBag as the ceiling.

example:
  heterps-exec ps-bench --rows 10000000 --dim 16 --zipf 1.05 --hot-fraction 0.05 --policy lfu
  heterps-exec ps-bench --rows 100000 --batches 20 --window 8 --quantize int8 --json
"""

from __future__ import annotations

import argparse
import json
import math

from heterps_exec.cli import ExecCliError
from heterps_exec.ps.spec import POLICIES, QUANTIZE
from heterps_sim.core.limits import seed_problem


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, default=10_000_000, help="table rows (default 10M)")
    p.add_argument("--dim", type=int, default=16, help="floats per row (default 16)")
    p.add_argument("--zipf", type=float, default=1.05, help="Zipf exponent of the ids")
    p.add_argument("--hot-fraction", type=float, default=0.05,
                   help="hot-tier rows as a share of the table (default 0.05)")
    p.add_argument("--warm-fraction", type=float, default=0.20,
                   help="warm (RAM) tier rows as a share of the table (default 0.20)")
    p.add_argument("--policy", default="lfu", help=f"hot-tier policy: {', '.join(POLICIES)}")
    p.add_argument("--batch", type=int, default=4096, help="ids per pull (default 4096)")
    p.add_argument("--shards", type=int, default=1, help="PS ranks (default 1)")
    p.add_argument("--batches", type=int, default=200, help="timed batches (default 200)")
    p.add_argument("--window", type=int, default=4,
                   help="pulls in flight in the pipelined measurement (default 4)")
    p.add_argument("--quantize", default="none", choices=QUANTIZE,
                   help="pulled rows and pushed gradients on the wire (default none)")
    p.add_argument("--seed", type=int, default=0, help="seed of ids and initial rows")
    p.add_argument("--work-dir", default=None,
                   help="directory of the disk tier (default: a temporary directory)")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")


def _check(args) -> None:
    problems = [
        (args.rows >= 1, f"--rows: must be >= 1, got {args.rows}"),
        (args.dim >= 1, f"--dim: must be >= 1, got {args.dim}"),
        (math.isfinite(args.zipf) and 0 < args.zipf <= 100,  # 1e308 overflowed the weights
         f"--zipf: must be in (0, 100], got {args.zipf}"),
        (0 < args.hot_fraction <= 1, f"--hot-fraction: must be in (0, 1], got {args.hot_fraction}"),
        (0 <= args.warm_fraction <= 1,
         f"--warm-fraction: must be in [0, 1], got {args.warm_fraction}"),
        (args.policy in POLICIES,
         f"--policy: unknown policy {args.policy!r}; choose one of {', '.join(POLICIES)}"),
        (args.batch >= 1, f"--batch: must be >= 1, got {args.batch}"),
        (1 <= args.shards <= 8, f"--shards: must be in [1, 8], got {args.shards}"),
        (2 <= args.batches <= 1_000_000, f"--batches: must be >= 2 and <= 1000000, got {args.batches}"),
        (1 <= args.window <= 64, f"--window: must be in [1, 64], got {args.window}"),
        (seed_problem(args.seed) is None, seed_problem(args.seed)),
    ]
    for ok, message in problems:
        if not ok:
            raise ExecCliError(message)
    from heterps_exec.cli.sizes import ps_bench_problem
    too_big = ps_bench_problem(args.rows, args.dim, args.batch, args.batches,
                               args.hot_fraction, args.warm_fraction)
    if too_big:
        raise ExecCliError(too_big)
    if args.work_dir:
        from heterps_sim.core.outputs import OutputError, check_target
        try:
            check_target(args.work_dir, folder=True)
        except OutputError as exc:
            raise ExecCliError(f"--work-dir: {exc}") from None


def _pct(x: float) -> str:
    return f"{100 * x:5.1f}%"


def format_text(r: dict) -> str:
    c = r["config"]
    lines = [
        f"ps-bench: {c['rows']:,} rows x {c['dim']} floats, Zipf {c['zipf']}, batch "
        f"{c['batch']}, {c['shards']} PS rank(s), policy {c['policy']}, hot "
        f"{c['hot_fraction']:g} ({int(c['rows'] * c['hot_fraction']):,} rows), warm "
        f"{c['warm_fraction']:g}; {c['timed_batches']} timed batches, quantize "
        f"{c['quantize']}",
        "",
        f"{'':30}{'rows/s':>14}{'x raw gloo':>12}",
    ]
    raw, raw_w, w = r["raw_p2p_rows_per_s"], r["raw_p2p_window_rows_per_s"], c["window"]
    for name, key, ref in [
            ("pull, one at a time", "pull_rows_per_s", raw),
            (f"pull, {w} in flight", "pull_window_rows_per_s", raw_w),
            ("push + end_step", "push_rows_per_s", raw),
            ("raw gloo p2p, one at a time", "raw_p2p_rows_per_s", raw),
            (f"raw gloo p2p, {w} in flight", "raw_p2p_window_rows_per_s", raw_w),
            ("nn.EmbeddingBag (ceiling)", "embedding_bag_rows_per_s", raw)]:
        lines.append(f"{name:30}{r[key]:>14,.0f}{r[key] / ref:>12.2f}")
    lines += [
        f"pulled row bytes on the wire: {r['pull_bytes_per_row']:.0f} per distinct row",
        f"distinct ids per batch: {_pct(r['unique_share']).strip()} of the ids",
        "",
        f"{'hit rates (distinct ids/batch)':34}{'hot':>7}{'warm':>7}{'cold':>7}{'new':>7}",
    ]
    for name, key in [("measured by the PS ranks", "hit_rates_measured"),
                      ("replayed (heterps_sim/tiers/replay.py)", "hit_rates_replayed")]:
        h = r[key]
        lines.append(f"{name:34}" + "".join(f"{_pct(h[t]):>7}" for t in ("hot", "warm", "cold",
                                                                       "new")))
    lines.append(f"{'Belady optimum (hot tier)':34}{_pct(r['belady_hot_hit_rate']):>7}")
    return "\n".join(lines)


def run(args) -> int:
    _check(args)
    from heterps_exec.ps.bench import run_bench
    from heterps_sim.util import progress  # on stderr, only on a terminal (--quiet: never)

    result = run_bench(rows=args.rows, dim=args.dim, zipf=args.zipf,
                       hot_fraction=args.hot_fraction, warm_fraction=args.warm_fraction,
                       policy=args.policy, batch=args.batch, shards=args.shards,
                       batches=args.batches, seed=args.seed, window=args.window,
                       quantize=args.quantize, work_dir=args.work_dir,
                       progress=lambda msg: progress.phase(f"ps-bench: {msg}"))
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(format_text(result))
    return 0
