"""Measured per-layer GPU times against the roofline's estimate for the same card.

    .venv/bin/python benchmarks/gpu_profile_vs_roofline.py                      # the H200 files
    .venv/bin/python benchmarks/gpu_profile_vs_roofline.py --label h200 --type h200-141gb-sxm

Reads traces/profiles/<label>-cuda0-<model>.csv (written by `heterps-exec profile` on the GPU,
benchmarks/gpu_profile_run.sh) and prints, per model and batch size, the measured oct_s
(forward + backward: what a trace puts in place of the roofline) summed over the model's
layers, the roofline's oct_s for the catalog row `--type` (heterps_sim/inputs/roofline.py,
default efficiencies, fp32) and their ratio; then the layers with the largest ratio. The
roofline is computed on the zoo model at its full table sizes: its oct_s does not depend on a
table's row count (rows touched per sample do), so a profile measured with --table-scale
compares as it is. Last, the same sums split as the engine's calibration splits them
(calibration/profiler.fit_linear: a + c x batch per layer): the fixed part a, which the
roofline does not have, and the per-sample part c against the roofline's slope.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from heterps_exec.calibration.profiler import fit_linear
from heterps_sim.core.spec import ProfileOptions
from heterps_sim.inputs import zoo
from heterps_sim.inputs.catalog import load_catalog
from heterps_sim.inputs.roofline import compute_s


def rows_of(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def compare(path: Path, rtype, options: ProfileOptions) -> list[dict]:
    """One dict per (layer, batch): measured and roofline oct_s."""
    rows = rows_of(path)
    spec = zoo.get_model(rows[0]["model"])
    layers = {layer.name: layer for layer in spec.layers}
    return [{"model": r["model"], "layer": r["layer"], "batch": int(r["batch_size"]),
             "measured_s": float(r["oct_s"]),
             "roofline_s": compute_s(layers[r["layer"]], rtype, int(r["batch_size"]), options)}
            for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", default="h200", help="host label of the profile files")
    ap.add_argument("--type", default="h200-141gb-sxm", help="catalog row to compare with")
    ap.add_argument("--dir", default="traces/profiles")
    ap.add_argument("--top", type=int, default=2, help="layers with the largest ratio, per model")
    args = ap.parse_args()
    [rtype] = [t for t in load_catalog() if t.name == args.type]
    options = ProfileOptions()
    files = sorted(Path(args.dir).glob(f"{args.label}-cuda0-*.csv"))
    print(f"measured on {args.label} (cuda:0) vs the roofline of {args.type} "
          f"(fp32 peak {rtype.peak_flops_fp32 / 1e12:g} TFLOP/s, "
          f"{rtype.memory_bandwidth_bytes_per_s / 1e9:g} GB/s; default efficiencies)")
    print(f"{'model':10} {'batch':>6} {'layers':>6} {'measured ms':>12} {'roofline ms':>12} "
          f"{'ratio':>8} {'layer ratio min..median..max':>30}")
    worst, fits = [], []
    for path in files:
        table = compare(path, rtype, options)
        for batch in sorted({t["batch"] for t in table}):
            part = [t for t in table if t["batch"] == batch]
            measured = sum(t["measured_s"] for t in part)
            roof = sum(t["roofline_s"] for t in part)
            ratios = sorted(t["measured_s"] / t["roofline_s"] for t in part if t["roofline_s"] > 0)
            mid = ratios[len(ratios) // 2]
            print(f"{part[0]['model']:10} {batch:>6} {len(part):>6} {measured * 1e3:>12.3f} "
                  f"{roof * 1e3:>12.4f} {measured / roof:>8.0f} "
                  f"{f'{ratios[0]:.0f}..{mid:.0f}..{ratios[-1]:.0f}':>30}")
        big = max(t["batch"] for t in table)
        top = sorted((t for t in table if t["batch"] == big),
                     key=lambda t: -t["measured_s"])[:args.top]
        worst += top
        fits.append((table[0]["model"], _split(table)))
    print("\nslowest layers at each model's largest batch:")
    print(f"{'model':10} {'layer':10} {'batch':>6} {'measured us':>12} {'roofline us':>12} {'ratio':>8}")
    for t in worst:
        print(f"{t['model']:10} {t['layer']:10} {t['batch']:>6} {t['measured_s'] * 1e6:>12.1f} "
              f"{t['roofline_s'] * 1e6:>12.2f} {t['measured_s'] / t['roofline_s']:>8.0f}")

    print("\nfixed + per-sample split (sum over layers of each layer's a + c x batch fit):")
    print(f"{'model':10} {'fixed ms':>9} {'measured us/sample':>19} {'roofline us/sample':>19} "
          f"{'ratio':>6}")
    for model, (fixed, slope, roof_slope) in fits:
        print(f"{model:10} {fixed * 1e3:>9.3f} {slope * 1e6:>19.4f} {roof_slope * 1e6:>19.4f} "
              f"{slope / roof_slope:>6.1f}")


def _split(table: list[dict]) -> tuple[float, float, float]:
    """(sum of the layers' fitted fixed seconds, their per-sample seconds, the roofline's
    per-sample seconds between the two largest batches)."""
    fixed = slope = 0.0
    for layer in dict.fromkeys(t["layer"] for t in table):
        part = [t for t in table if t["layer"] == layer]
        a, c = fit_linear([t["batch"] for t in part], [t["measured_s"] for t in part])
        fixed, slope = fixed + a, slope + c
    batches = sorted({t["batch"] for t in table})
    lo, hi = batches[-2], batches[-1]
    roof = {b: sum(t["roofline_s"] for t in table if t["batch"] == b) for b in (lo, hi)}
    return fixed, slope, (roof[hi] - roof[lo]) / (hi - lo)


if __name__ == "__main__":
    main()
