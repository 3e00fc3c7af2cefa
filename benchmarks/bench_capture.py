"""Capture + layer chain + roofline problem for a 40-layer user PyTorch model (goal: <= 30 s).

The model (`DeepCTR` below, a plain nn.Module as a user would write it): 8 embedding tables
of 10,000,000 rows x 16 (built on the "meta" device, as the scenario path builds it: no
memory for the tables), concatenated with 13 dense features, an MLP of 15 Linear+ReLU pairs
(width 256) and a logit: 39 leaf modules + the loss = 40 layers (`layers: leaf`; grouped,
each ReLU joins its Linear: 25). Timed per repeat, each phase
on its own:
  capture  build the module from its factory and torch.export it (dynamic batch)
  chain    layers at module boundaries, liveness, per-layer FLOPs (FlopCounterMode on meta)
  problem  the roofline problem over the 64 catalog types (inputs/roofline.build_problem)
Baseline in the same run: the zoo's 40-layer synthetic chain through the same build_problem
(the ratio says what capturing a real module costs over a generated chain). The first repeat
imports and warms torch.export; medians are over the later repeats.
Usage: python benchmarks/bench_capture.py [--repeats 3] [--json]
"""

from __future__ import annotations

import time

T_START = time.perf_counter()  # before torch is imported: what a first command pays

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402

import torch  # noqa: E402
from torch import nn  # noqa: E402

NUM_TABLES, ROWS, DIM, NUM_DENSE, WIDTH, DEPTH = 8, 10_000_000, 16, 13, 256, 15


class DeepCTR(nn.Module):
    def __init__(self, num_tables=NUM_TABLES, rows=ROWS, dim=DIM, num_dense=NUM_DENSE,
                 width=WIDTH, depth=DEPTH):
        super().__init__()
        self.tables = nn.ModuleList(nn.Embedding(rows, dim) for _ in range(num_tables))
        layers, inp = [], num_tables * dim + num_dense
        for _ in range(depth):
            layers += [nn.Linear(inp, width), nn.ReLU()]
            inp = width
        layers.append(nn.Linear(inp, 1))
        self.mlp = nn.Sequential(*layers)

    def forward(self, ids, dense):
        embs = [t(ids[:, k]) for k, t in enumerate(self.tables)]
        return self.mlp(torch.cat([*embs, dense], dim=1)).squeeze(1)


SECTION = {"module": "benchmarks.bench_capture:DeepCTR",
           "inputs": [{"name": "ids", "shape": [NUM_TABLES], "dtype": "int64",
                       "cardinality": ROWS},
                      {"name": "dense", "shape": [NUM_DENSE]}]}


def one_repeat() -> dict:
    from heterps_sim.core.spec import Cluster, Workload
    from heterps_sim.inputs import catalog, zoo
    from heterps_sim.inputs.roofline import build_problem
    from heterps_sim.inputs.torch_model import capture as cap
    from heterps_sim.inputs.torch_model.chain import measure
    from heterps_sim.inputs.torch_model.layers import build_chain
    from heterps_sim.inputs.torch_model.section import TorchModelSection

    section = TorchModelSection.model_validate(SECTION)
    t0 = time.perf_counter()
    module = cap.build_module(section, source="bench", device="meta")
    captured = cap.capture(module, cap.raw_inputs(section), cap.resolve_loss("bce", "bench"),
                           "bce", name="DeepCTR", source="bench", device="meta")
    t1 = time.perf_counter()
    spec = measure(build_chain(captured, "leaf"))[0]  # one layer per leaf, as measured 11-24
    t2 = time.perf_counter()
    cluster = Cluster(types=catalog.load_catalog())
    workload = Workload(batch_size=4096, throughput_limit=1e5, num_samples=1e9)
    problem = build_problem(spec, cluster, workload, name="bench-capture")
    t3 = time.perf_counter()
    zoo_spec = zoo.get_model("synthetic", num_layers=len(spec.layers), seed=0)
    build_problem(zoo_spec, cluster, workload, name="bench-zoo")
    t4 = time.perf_counter()
    return {"layers": len(spec.layers), "types": len(problem.type_names),
            "capture_s": t1 - t0, "chain_s": t2 - t1, "problem_s": t3 - t2,
            "total_s": t3 - t0, "zoo_problem_s": t4 - t3}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    runs = [one_repeat()]
    cold = time.perf_counter() - T_START  # torch import + first capture, chain and problem
    runs += [one_repeat() for _ in range(max(2, args.repeats) - 1)]
    later = runs[1:]
    med = {k: statistics.median(r[k] for r in later) for k in later[0] if k.endswith("_s")}
    out = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}",
           "layers": runs[0]["layers"], "types": runs[0]["types"],
           "first_total_s": runs[0]["total_s"], "cold_start_s": cold, "median": med,
           "ratio_to_zoo_chain": med["total_s"] / med["zoo_problem_s"]}
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"{out['layers']} layers x {out['types']} types ({out['machine']})")
    print(f"cold start (torch import + first repeat): {cold:.2f} s; first repeat alone "
          f"{out['first_total_s']:.2f} s")
    for k in ("capture_s", "chain_s", "problem_s", "total_s", "zoo_problem_s"):
        print(f"  median {k:<14} {med[k]:8.3f}")
    print(f"goal: <= 30 s -> {'met' if cold <= 30 else 'MISSED'} (cold start, the slowest)")


if __name__ == "__main__":
    main()
