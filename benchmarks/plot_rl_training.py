"""Training curves of the `rl` policy from heterps_sim/schedulers/rl/stagewise/train.py's CSV logs (reads files, computes nothing).

    python benchmarks/plot_rl_training.py PRETRAIN.csv [FINETUNE.csv ...] --out FIG.png

Left: the imitation phase of pre-training (cross-entropy per decision of the exact optimum's
stages, smoothed over 25 steps) against wall time. Right, per fine-tune log: the mean reward of
each PPO batch of sampled plans (solid) and the best plan's so far (dashed), reward =
-ln(cost / the cheapest single-type plan's).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pretrain")
    ap.add_argument("finetune", nargs="*")
    ap.add_argument("--out", default="benchmarks/figures/rl_training.png")
    args = ap.parse_args()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4), dpi=90)
    pre = pd.read_csv(args.pretrain)
    imit = pre[pre.phase == "imitation"]
    left.plot(imit.wall_s, imit.loss.rolling(25, min_periods=1).mean())
    left.set(xlabel="wall s (1 thread)", ylabel="imitation loss (nats / decision)",
             title="pre-training: imitation of exact optima")
    for path in args.finetune:
        log = pd.read_csv(path)
        ppo = log[log.phase == "ppo"]
        line, = right.plot(ppo["update"], ppo["reward_mean"], label=Path(path).stem)
        right.plot(ppo["update"], -np.log(ppo["best_over_reference"]), "--",
                   color=line.get_color())
    right.set(xlabel="PPO update", ylabel="reward = -ln(cost / single-type cost)",
              title="PPO fine-tune: batch mean, best (dashed)")
    if args.finetune:
        right.legend(fontsize=7)
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
