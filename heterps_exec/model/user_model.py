"""The engine's side of a user's PyTorch model: run spec entry, stages, data view, reference.

    entry = run_entry(section, "s.yaml", plan, table_scale=1.0)   # launcher: RunSpec.user_model
    module, cut_in, cut_out = user_stage(spec, plan, stage, device, wire)   # a rank's stage
    model = whole_model(spec)        # the eager module: heterps_exec/runtime/reference.py's oracle

Every rank builds the whole module from the factory (same seed, so the same weights), sets
each embedding table to its deterministic initial rows (heterps_exec/model/rows.py: what a
parameter-server shard creates lazily, so local, PS and single-process training start
alike), captures it with torch.export and keeps only its stage's layers. The launcher
captures once before any rank starts, so a model that cannot be built, captured or cut at
the plan's layers is one line of bad input (exit 2). Data: the model's raw tensors (its
inputs and the label) are described to heterps_exec.data as a small ModelGraph, so synthetic,
Criteo, Parquet and factory data serve user models as they serve the zoo's.
"""

from __future__ import annotations

from functools import lru_cache

import torch
from torch import nn

from heterps_exec.model.extra_loss import StageTerm, add_gradient, trained
from heterps_exec.model.rows import initial_rows
from heterps_sim.inputs.graph import F32, ID_BYTES, ModelGraph, Node
from heterps_sim.inputs.torch_model import capture_section
from heterps_sim.inputs.torch_model.adopt import adopt
from heterps_sim.inputs.torch_model.bags import forward_args
from heterps_sim.inputs.torch_model.capture import BAG_WEIGHTS, CaptureError
from heterps_sim.inputs.torch_model.section import LABEL, LENGTHS, WEIGHTS, TorchModelSection


def run_entry(section, scenario: str, plan, *, table_scale: float = 1.0,
              ps_shards: int = 0) -> dict:
    """RunSpec.user_model for a torch section ({} for any other), checked against the plan:
    raises CaptureError (one line) for a model that cannot be captured or cut there."""
    if not isinstance(section, TorchModelSection):
        return {}
    from pathlib import Path
    if table_scale != 1:
        raise CaptureError(f"{scenario}: --table-scale: applies to zoo models; a user model's "
                           "table sizes come from model.kwargs")
    paths = [str(Path(scenario).resolve().parent)]
    entry = {"section": section.model_dump(mode="json"), "search_paths": paths,
             "source": scenario}
    chain, grad = _chain(entry, "meta")
    label = chain.captured.label
    from heterps_exec.model.dropout import unseeded_call
    why = unseeded_call(chain.captured.graph_module, scenario)
    if why:
        raise CaptureError(why)
    if chain.captured.extra_loss is not None and ps_shards:
        raise CaptureError(f"{scenario}: model.extra_loss: not applied under --ps-shards yet "
                           "(see heterps_exec/model/extra_loss.py); keep the tables local")
    stage_of = {}
    for g, stage in enumerate(plan.stages):
        for name in stage.layers:
            stage_of[chain.index(name)] = g
    users: dict[str, set[int]] = {}
    for i in range(len(chain.names)):
        for target in chain.params_of(i):
            users.setdefault(target, set()).add(stage_of[i])
    for target, stages in sorted(users.items()):
        if len(stages) > 1 and target in dict(chain.captured.module.named_parameters()):
            raise CaptureError(f"{scenario}: plan: parameter {target!r} is read by stages "
                               f"{sorted(stages)}; keep the layers that read it in one stage")
    if chain.captured.extra_loss is not None:
        _check_extra_loss(entry, chain, stage_of, plan, scenario)
    if section.batchnorm != "exact":  # which stage each BatchNorm runs in (the oracle's)
        entry["norm_stages"] = {t.rpartition(".")[0]: stage_of[i]
                                for i in range(len(chain.names)) for t in chain.params_of(i)
                                if t.rpartition(".")[2] == "running_mean"}
    # what the ranks need without capturing on meta again: which values carry a gradient
    # across a cut, and the label's per-sample shape and dtype
    from heterps_sim.inputs.torch_model.segment import find_tables
    tables = {t: [tb.path, tb.rows, tb.dim] for t, tb in find_tables(chain).items()}
    # the output kind, declared or detected, travels with the run: ranks and scorers read it
    entry["section"]["output"] = chain.captured.output
    return {**entry, "grad_keys": sorted(k for k, g in grad.items() if g), "tables": tables,
            "label": {"shape": list(label.shape), "dtype": str(label.dtype).removeprefix("torch.")}}


def _check_extra_loss(entry: dict, chain, stage_of: dict, plan, scenario: str) -> None:
    """model.extra_loss: each term must read one stage's parameters (model/extra_loss.py);
    checked on the CPU for models up to CHECK_MAX_VALUES values."""
    from heterps_exec.model.extra_loss import CHECK_MAX_VALUES, check_separable
    from heterps_sim.inputs.torch_model.capture import build_module
    if len(plan.stages) < 2:
        return
    shapes = chain.captured.module
    if sum(p.numel() for p in shapes.parameters()) > CHECK_MAX_VALUES:
        return
    section = _section(entry)
    module = (shapes if str(chain.captured.device) != "meta" else
              build_module(section, source=scenario, device="cpu",
                           search_paths=entry["search_paths"]))
    own: list[set[str]] = [set() for _ in plan.stages]
    for i in range(len(chain.names)):
        own[stage_of[i]] |= chain.params_of(i)
    why = check_separable(chain.captured.extra_loss, module, [sorted(o) for o in own])
    if why:
        raise CaptureError(f"{scenario}: model.extra_loss: {section.extra_loss} cannot be split "
                           f"over this plan's stages: {why}; keep those parameters in one "
                           "stage, or write the term per parameter group")


def _section(entry: dict) -> TorchModelSection:
    return TorchModelSection.model_validate(entry["section"])


def build_user_module(entry: dict, seed: int, device: str | torch.device = "cpu") -> nn.Module:
    """The user's module, seeded, with every plain embedding table at its initial rows."""
    from heterps_sim.inputs.torch_model.capture import build_module
    module = build_module(_section(entry), source=entry["source"], seed=seed, device=device,
                          search_paths=entry["search_paths"])
    if torch.device(device).type != "meta":
        _init_tables(entry, module, seed)
    return module


@torch.no_grad()
def _init_tables(entry: dict, module: nn.Module, seed: int) -> None:
    for target, (path, num_rows, dim) in entry["tables"].items():
        weight = module.get_parameter(target)
        rows = initial_rows(path, range(num_rows), dim, seed)
        weight.copy_(torch.from_numpy(rows).to(weight.device))


def _chain(entry: dict, device: str = "meta"):
    """(LayerChain, gradient flags) of the entry's model captured on meta (cached)."""
    import json
    base = {k: entry[k] for k in ("section", "search_paths", "source")}
    return _meta_chain(json.dumps(base, sort_keys=True))


@lru_cache(maxsize=4)
def _meta_chain(key: str):
    import json

    from heterps_sim.inputs.torch_model import measured_section
    entry = json.loads(key)
    chain, _, grad = measured_section(_section(entry), source=entry["source"],
                                      search_paths=entry["search_paths"])
    return chain, grad


def user_stage(spec, plan, stage: int, device: torch.device, wire: str):
    """(stage module, Boundary in or None, Boundary out or None) for `stage` of the plan."""
    from heterps_exec.model.user_stage import UserStage, WireShapes, hold_unused, user_boundary
    from heterps_sim.inputs.torch_model.segment import make_holder
    entry = spec.user_model
    grad = dict.fromkeys(entry["grad_keys"], True)
    module = build_user_module(entry, spec.seed, device)
    chain = capture_section(_section(entry), source=entry["source"],
                            search_paths=entry["search_paths"], module=module,
                            device=str(device))
    layers = plan.stages[stage].layers
    lo, hi = chain.index(layers[0]), chain.index(layers[-1])
    part = UserStage(chain, lo, hi, make_holder(chain), WireShapes(chain))
    if chain.captured.extra_loss is not None:  # its gradient once per step: model/extra_loss.py
        own = [p for p in part.parameters() if p.requires_grad]
        part.extra_loss = StageTerm(chain.captured.extra_loss, module, own)
    if stage == 0:  # parameters no layer reads (never called): kept in the saved state
        hold_unused(part, module, chain)
    last = len(plan.stages) - 1
    cut_in = (user_boundary(chain, chain.index(plan.stages[stage - 1].layers[-1]), grad, wire)
              if stage else None)
    cut_out = user_boundary(chain, hi, grad, wire) if stage < last else None
    return part, cut_in, cut_out


def data_graph(entry: dict) -> ModelGraph:
    """The model's raw tensors as heterps_exec.data reads them: each integer input as ids
    below its cardinality (the smallest, where columns differ), float inputs as features
    (inside their declared range; their id columns as ids), the label as the loss's target."""
    section = _section(entry)
    label_shape, label_dtype = entry["label"]["shape"], entry["label"]["dtype"]
    raw, nodes = [], []
    for spec in section.inputs:
        is_id = spec.dtype in ("int64", "int32")
        raw.append((spec.name, spec.width * (ID_BYTES if is_id else F32)))
        if spec.bag:  # its per-sample lengths, 1..max_len, beside the padded ids
            lengths = spec.name + LENGTHS
            raw.append((lengths, ID_BYTES))
            nodes.append(Node(name=f"{lengths}_input", kind="input", op="input",
                              consumes=(lengths,), produces=(), forward_flops=0.0,
                              backward_flops=0.0, attrs={"lengths_of": spec.name,
                                                         "max_len": spec.shape[0]}))
        if spec.per_sample_weights:  # one float per id, padded like the ids
            weights = spec.name + WEIGHTS
            raw.append((weights, spec.width * F32))
            nodes.append(Node(name=f"{weights}_input", kind="input", op="input",
                              consumes=(weights,), produces=(), forward_flops=0.0,
                              backward_flops=0.0, attrs={"weights_of": lengths,
                                                         "range": BAG_WEIGHTS}))
        if spec.range is not None or spec.id_columns:  # synthetic data: not N(0, 1) there
            attrs = {"range": tuple(spec.range) if spec.range is not None else None,
                     "id_columns": tuple(spec.id_columns or ())}
            nodes.append(Node(name=f"{spec.name}_input", kind="input", op="input",
                              consumes=(spec.name,), produces=(), forward_flops=0.0,
                              backward_flops=0.0, attrs=attrs))
        if is_id:
            card = spec.cardinality
            rows = min(card) if isinstance(card, list) else card
            nodes.append(Node(name=f"{spec.name}_lookup", kind="embedding", op="embedding",
                              consumes=(spec.name,), produces=(), forward_flops=0.0,
                              backward_flops=0.0, attrs={"tables": (rows,)}))
    classes = not label_dtype.startswith(("float", "bfloat"))
    width = 1
    for d in label_shape:
        width *= d
    raw.append((LABEL, ID_BYTES if classes else width * F32))
    nodes.append(Node(name="loss", kind="loss", op="loss", consumes=("output", LABEL),
                      produces=(), forward_flops=0.0, backward_flops=0.0,
                      attrs={"loss": "softmax_ce" if classes else "bce"}))
    name = section.name or section.module.rpartition(":")[2]
    return ModelGraph(name=name, source=f"user model {section.module}", raw=tuple(raw),
                      tensor_bytes=dict(raw), nodes=tuple(nodes),
                      tensor_grad=dict.fromkeys(dict(raw), False))


class UserWhole(nn.Module):
    """The whole eager user module behind the zoo's model contract: forward(env of raw
    [batch, width] tensors) -> (env + {"output": the model output}, summed loss). Its state
    dict is the user module's (held scorers load a run's state.pt into it)."""

    def __init__(self, entry: dict, module: nn.Module) -> None:
        super().__init__()
        self.__dict__["inner"] = module
        adopt(self, module)
        chain = _chain(entry)[0]
        self.cap = chain.captured
        self.read = trained(module, chain)
        names = {id(p): n for n, p in self.named_parameters()}
        self.read_names = [names[id(p)] for p in self.read]
        """Their names (an async version's tensors are given by name)."""

    def extra_loss(self, read: dict[str, torch.Tensor] | None = None) -> float | None:
        """Add the gradient of model.extra_loss to the parameters a layer reads (once per
        step, as the engine does: model/extra_loss.py); None when there is none. `read`: the
        async version's tensors by parameter name, swapped in by the caller: the gradient
        goes to them."""
        if self.cap.extra_loss is None:
            return None
        if read is None:
            return add_gradient(self.cap.extra_loss, self.inner, self.read)
        return add_gradient(self.cap.extra_loss, self.inner,
                            [read[n] for n in self.read_names])

    def forward(self, env: dict[str, torch.Tensor]):
        cap = self.cap
        n = next(iter(env.values())).shape[0]
        args = [env[r.name].reshape(n, *r.shape).to(r.dtype) for r in cap.inputs]
        out = self.inner(*forward_args(cap.inputs, args))  # a bag's (ids, offsets)
        loss = None
        if LABEL in env:
            label = env[LABEL].reshape(n, *cap.label.shape).to(cap.label.dtype)
            loss = cap.loss(out, label)
        return {**env, "output": out.reshape(n, -1)}, loss


def whole_model(spec) -> UserWhole:
    """The run's user module, whole, as single-process code sees it (seeded, tables set)."""
    return UserWhole(spec.user_model, build_user_module(spec.user_model, spec.seed))
