"""The ModelGraph a scenario's `model:` section describes: a zoo model or layers in YAML.

    graph = section_graph(scn.model, "s.yaml")     # the planner's spec is graph.to_spec()

One place both packages ask, so `heterps-sim` plans, `heterps-exec profile` measures and the
engine trains the same layers. A zoo model's params are checked against its builder
(inputs/zoo_params.py); a layer list is built by inputs/yaml_model.py. Every failure is one
line naming `model.<field>`.
"""

from __future__ import annotations

from heterps_sim.core.files import UserFileError
from heterps_sim.inputs import zoo
from heterps_sim.inputs.graph import ModelGraph
from heterps_sim.inputs.yaml_model import layer_graph
from heterps_sim.inputs.zoo_params import checked_params


def section_graph(section, source: str = "<scenario>") -> ModelGraph:
    """The graph of a validated ModelSection (zoo name + params, or name + layers)."""
    if getattr(section, "module", None):  # inputs/torch_model captures these, no graph
        raise UserFileError(f"{source}: model.module: a PyTorch module has no zoo graph; "
                            "this command takes a zoo model or layers written in YAML")
    if section.layers is not None:
        if section.name in zoo.GRAPHS:
            raise UserFileError(f"{source}: model.name: {section.name!r} is a zoo model; give "
                                "a model written in layers its own name")
        return layer_graph(section.name, section.layers, source)
    params = checked_params(section.name, section.params, source)
    try:
        return zoo.model_graph(section.name, **params)
    except KeyError as exc:
        raise UserFileError(f"{source}: model.name: {exc.args[0]}") from None
    except (TypeError, ValueError, ArithmeticError) as exc:
        raise UserFileError(f"{source}: model.params: {exc}") from None


def layer_dicts(section) -> list[dict]:
    """A section's layers as plain JSON-able dicts (what a run spec carries); [] for a zoo model."""
    return [] if section.layers is None else [e.model_dump(by_alias=True) for e in section.layers]


def run_graph(name: str, params: dict, layers: list[dict]) -> ModelGraph:
    """The graph a run spec names: its layers when it has some, else the zoo model."""
    if layers:
        from pydantic import TypeAdapter

        from heterps_sim.inputs.yaml_model import YamlLayer
        entries = TypeAdapter(list[YamlLayer]).validate_python(layers)
        return layer_graph(name, entries, "run spec")
    return zoo.model_graph(name, **checked_params(name, params, "run spec"))


MODEL_TAGS = ("zoo", "torch")
"""Tags of scenario.py's `model:` union (a zoo or YAML-layer model, or a PyTorch module)."""


class UntaggedErrors:
    """A pydantic error's problems with the model union's tag left out of each path, so a
    message says `model.layers.0.dim`, not `model.zoo.layers.0.dim`: the tag is how the section
    was told apart, not a field the user wrote. Duck-types ValidationError.errors()."""

    def __init__(self, exc) -> None:
        self._exc = exc

    def errors(self) -> list[dict]:
        out = []
        for e in self._exc.errors():
            loc = tuple(e["loc"])
            if len(loc) > 1 and loc[0] == "model" and loc[1] in MODEL_TAGS:
                e = {**e, "loc": (loc[0], *loc[2:])}
            out.append(e)
        return out
