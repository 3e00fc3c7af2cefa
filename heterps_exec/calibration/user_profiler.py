"""Measure a user's PyTorch model layer by layer: the same rows profiler.py writes for the zoo.

    target = user_target(scn.model, "s.yaml")              # captured once, checked
    rows = profile_user_layers(target, batches=(256,), device="cpu")

Each layer of the chain heterps derived (inputs/torch_model) runs alone as the engine runs it:
a one-layer stage (model/user_stage.UserStage) on the wire-format env the layers before it
made (they run once, untimed), its gradient-carrying inputs fresh leaves, so forward and
backward time exactly that layer's work. The update of the parameters it reads (one SGD step,
as the engine) and the boundary after it (user_boundary: encoded into and decoded from the
engine's wire format) are timed too. Tables are the module's own (built at their real size:
a user model's table sizes come from its kwargs), starting from heterps' deterministic rows.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass

import torch

from heterps_exec.calibration.profiler import _timed, backward_and_update_s


@dataclass(frozen=True, slots=True)
class UserTarget:
    """A user model to profile: the engine's run entry (model/user_model.run_entry) and the
    planner's ModelSpec of it."""

    entry: dict
    spec: object
    name: str
    """The name its rows carry (the scenario's model.name, else the factory's)."""

    @property
    def layer_names(self) -> list[str]:
        return [la.name for la in self.spec.layers]


def user_target(section, scenario: str) -> UserTarget:
    """Capture the scenario's torch model section; a one-stage plan of every layer makes the
    run entry (which checks that the model builds, captures and cuts)."""
    from pathlib import Path

    from heterps_exec.model.user_model import run_entry
    from heterps_sim.core.plan import Plan, Stage
    from heterps_sim.inputs.torch_model import scenario_model_spec
    spec = scenario_model_spec(section, scenario, Path(scenario))
    whole = Plan(stages=(Stage(layers=tuple(la.name for la in spec.layers), resource="any",
                               num_replicas=1),))
    entry = run_entry(section, scenario, whole)
    return UserTarget(entry, spec, section.name or section.module.rpartition(":")[2])


def layer_param_bytes(spec) -> list[float]:
    """Per layer, every parameter byte a replica of it holds, tables included (local tables
    are all-reduced like dense weights): what calibration/calibrate.py calls param_bytes."""
    return [float(la.param_bytes) + 4.0 * la.table_rows * la.table_dim for la in spec.layers]


def _example_batch(target: UserTarget, batch: int, seed: int) -> dict[str, torch.Tensor]:
    """One global batch of synthetic data for the model's raw tensors (wire format)."""
    from heterps_exec.data import BatchStream, generate_dataset
    from heterps_exec.model.user_model import data_graph
    with tempfile.TemporaryDirectory() as d:
        generate_dataset(data_graph(target.entry), d, num_samples=batch, seed=seed)
        full = BatchStream(d, batch_size=batch, seed=seed).batch(0)
    return {k: torch.from_numpy(v) for k, v in full.items()}


def profile_user_layers(target: UserTarget, *, batches=(8, 64, 256), device: str = "cpu",
                        repeats: int = 15, warmup: int = 3, seed: int = 0) -> list[dict]:
    """One row per (layer, batch), as profiler.profile_layers: forward_s, backward_s,
    optimizer_s, encode_s, decode_s."""
    from heterps_exec.model.user_model import _section, build_user_module
    from heterps_exec.model.user_stage import UserStage, WireShapes, user_boundary
    from heterps_sim.inputs.torch_model import capture_section
    from heterps_sim.inputs.torch_model.segment import make_holder
    dev = torch.device(device)
    entry = target.entry
    module = build_user_module(entry, seed, dev)
    chain = capture_section(_section(entry), source=entry["source"],
                            search_paths=entry["search_paths"], module=module, device=str(dev))
    holder, shapes = make_holder(chain), WireShapes(chain)
    grad = dict.fromkeys(entry["grad_keys"], True)
    stages = [UserStage(chain, i, i, holder, shapes) for i in range(len(chain.names))]
    full = _example_batch(target, max(batches), seed)
    rows = []
    for batch in batches:
        env = {k: v[:batch].to(dev) for k, v in full.items()}
        for i, (name, stage) in enumerate(zip(chain.names, stages, strict=True)):
            inputs = {k: (v.detach().clone().requires_grad_(True)
                          if v.is_floating_point() and grad.get(k) else v)
                      for k, v in env.items()}

            def forward(stage=stage, inputs=inputs):
                return stage(inputs)

            fwd_s = _timed(forward, repeats, warmup, dev)
            out, loss = forward()
            ends = [t for t in out.values() if t.requires_grad]
            ends += [loss] if loss is not None and loss.requires_grad else []

            bwd_s, opt_s = backward_and_update_s(ends, stage, repeats, warmup, dev)
            for p in stage.parameters():  # free what the timing left behind
                p.grad = None
            with torch.no_grad():
                env = {k: v.detach() for k, v in stage(env)[0].items()}
            enc_s = dec_s = 0.0
            if i < len(chain.names) - 1:
                cut = user_boundary(chain, i, grad)
                message = cut.encode(env)[0]
                enc_s = _timed(lambda c=cut, e=env: c.encode(e), repeats, warmup, dev)
                dec_s = _timed(lambda c=cut, m=message: c.decode(m), repeats, warmup, dev)
            rows.append({"model": target.name, "layer": name, "batch_size": batch,
                         "forward_s": fwd_s, "backward_s": bwd_s, "optimizer_s": opt_s,
                         "encode_s": enc_s, "decode_s": dec_s, "device": str(dev),
                         "threads": torch.get_num_threads()})
    return rows
