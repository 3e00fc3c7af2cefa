"""Write a small Criteo-format file (label, 13 counts, 26 hex categoricals; tab-separated).

    python examples/make_criteo_sample.py runs/criteo-sample.tsv --rows 20000 --seed 0

The rows are drawn from the seed (same seed, same bytes; nothing is downloaded): see
heterps_exec.data.criteo_sample for what they look like. --bad-rows N makes N lines
malformed, to see how a run counts and reports them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from heterps_exec.data.criteo_sample import write_criteo_sample


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path, help="the .tsv file to write")
    p.add_argument("--rows", type=int, default=20_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bad-rows", type=int, default=0, help="malformed lines to put in")
    args = p.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    bad = write_criteo_sample(args.out, rows=args.rows, seed=args.seed, bad_rows=args.bad_rows)
    print(f"wrote {args.rows:,} rows to {args.out}"
          + (f" ({len(bad)} malformed, lines {', '.join(map(str, bad[:5]))}"
             f"{', ...' if len(bad) > 5 else ''})" if bad else ""))


if __name__ == "__main__":
    main()
