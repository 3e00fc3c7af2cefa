"""The engine's per-microbatch overhead per boundary: a user's PyTorch module vs the same model
written in YAML layers (which the engine builds from the zoo's blocks), on the same plan shape.

Both models: 8 id fields, one table shared by all fields (8 x 1,000 rows, dim 8), the field
vectors flattened and an MLP 64-32-1 with a BCE loss. Plan: 2 stages on one CPU type (the
embedding, then the MLP and loss), 1 replica each, 1f1b, 32 microbatches of 8 samples, so
compute is almost nothing and what a step costs is the runtime's own work. Per run:

    overhead per microbatch per boundary = (step time - busiest stage's compute) / (m + S - 1)

with the stage compute the engine itself measures (result.json extra.stages compute_s).
Runs alternate user / YAML; medians over --repeats; the goal: user within 20% of YAML.

    python benchmarks/bench_user_overhead.py [--repeats 5] [--steps 30] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from exec_cli import run_exec  # noqa: E402

CPU = "xeon-icelake-16vcpu"
MODULE = '''
import numpy as np
import torch
from torch import nn


class FieldMLP(nn.Module):
    """Public-CTR style: field offsets in numpy, one shared table, view, an MLP."""

    def __init__(self, field_dims, embed_dim, mlp_dims):
        super().__init__()
        self.offsets = np.array((0, *np.cumsum(field_dims)[:-1]), dtype=np.int64)
        self.embedding = nn.Embedding(int(sum(field_dims)), embed_dim)
        self.flat = len(field_dims) * embed_dim
        layers, width = [], self.flat
        for out in mlp_dims:
            layers += [nn.Linear(width, out), nn.ReLU()]
            width = out
        self.mlp = nn.Sequential(*layers, nn.Linear(width, 1))

    def forward(self, ids):
        ids = ids + torch.as_tensor(self.offsets, device=ids.device).unsqueeze(0)
        return self.mlp(self.embedding(ids).view(-1, self.flat)).squeeze(1)
'''
FIELDS, ROWS, DIM, BATCH, M = 8, 1000, 8, 256, 32


def _write(tmp: Path) -> dict[str, tuple[str, str]]:
    (tmp / "field_mlp.py").write_text(MODULE)
    head = (f"cluster: {{types: [{CPU}]}}\nworkload: {{batch_size: {BATCH}, "
            "throughput_limit: 1000, num_samples: 1.0e+6}\n")
    (tmp / "user.yaml").write_text(
        "name: bench-user\nmodel:\n  module: field_mlp:FieldMLP\n"
        f"  kwargs: {{field_dims: {[ROWS] * FIELDS}, embed_dim: {DIM}, mlp_dims: [64, 32]}}\n"
        f"  inputs: [{{name: ids, shape: [{FIELDS}], dtype: int64, cardinality: {ROWS}}}]\n"
        "  loss: bce\n" + head)
    slots = ", ".join(f"f{i}: 1" for i in range(FIELDS))
    ids = ", ".join(f"f{i}" for i in range(FIELDS))
    (tmp / "yaml.yaml").write_text(
        "name: bench-yaml\nmodel:\n  name: field-mlp\n  layers:\n"
        f"    - {{type: input, dense: 0, sparse: {{{slots}}}}}\n"
        f"    - {{type: embedding, name: emb, ids: [{ids}], rows: {ROWS * FIELDS}, dim: {DIM}, "
        "merge: concat}\n"
        "    - {type: mlp, name: top, widths: [64, 32, 1], last_activation: none}\n"
        "    - {type: loss, loss: bce}\n" + head)
    plans = {}
    user_cut = (["embedding"], ["mlp.0", "mlp.1", "mlp.2", "mlp.3", "mlp.4", "loss"])
    yaml_cut = (["input", "emb"], ["top_0", "top_1", "top_2", "loss"])
    for name, (a, b) in (("user", user_cut), ("yaml", yaml_cut)):
        path = tmp / f"{name}-plan.json"
        path.write_text(json.dumps({"stages": [
            {"layers": a, "resource": CPU, "num_replicas": 1},
            {"layers": b, "resource": CPU, "num_replicas": 1}],
            "num_microbatches": M, "schedule": "1f1b"}))
        plans[name] = (str(path), str(tmp / f"{name}.yaml"))
    return plans


def _overhead(plan: str, scenario: str, out: Path, steps: int) -> float:
    code, stdout, err = run_exec("run", plan, "--scenario", scenario, "--steps", str(steps),
                                 "--warmup-steps", str(max(1, steps // 5)), "--out", str(out),
                                 "--json")
    if code:
        raise SystemExit(f"engine run failed: {err[-2000:]}")
    result = json.loads(stdout)
    busiest = max(s["compute_s"] for s in result["extra"]["stages"])
    stages = len(result["stages"])
    return (result["step_time_s"] - busiest) / (M + stages - 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    runs: dict[str, list[float]] = {"user": [], "yaml": []}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        plans = _write(tmp)
        for r in range(args.repeats):  # alternate, so drift on the host hits both alike
            for name, (plan, scenario) in plans.items():
                runs[name].append(_overhead(plan, scenario, tmp / f"{name}-{r}", args.steps))
    med = {k: statistics.median(v) for k, v in runs.items()}
    ratio = med["user"] / med["yaml"]
    report = {"median_overhead_s": med, "runs_s": runs, "ratio_user_over_yaml": ratio,
              "goal_met": ratio <= 1.2}
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for k in ("user", "yaml"):
            print(f"{k:5} overhead per microbatch per boundary: median {med[k] * 1e6:7.1f} us  "
                  f"(runs: {', '.join(f'{x * 1e6:.0f}' for x in runs[k])})")
        print(f"user / yaml: {ratio:.2f} (goal <= 1.20: {'met' if ratio <= 1.2 else 'missed'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
