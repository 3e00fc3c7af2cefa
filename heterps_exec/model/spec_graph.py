"""The model graph a run spec names: a zoo graph with its tables scaled, or a user module's.

The one place the engine's ranks, its reference training, its data readers and its
predictions turn a RunSpec into the graph they build, feed or price.
"""

from __future__ import annotations

from heterps_exec.model.build import scale_tables
from heterps_exec.runtime.layout import RunSpec
from heterps_sim.inputs.graph import ModelGraph
from heterps_sim.inputs.model_source import run_graph


def graph_for(spec: RunSpec) -> ModelGraph:
    """The run's graph: a user's PyTorch module's (its raw tensors, for heterps_exec.data),
    else the zoo or YAML model at the spec's table scale."""
    if spec.user_model:  # capturing a module is heavier: only when the run has one
        from heterps_exec.model.user_model import data_graph
        return data_graph(spec.user_model)
    return scale_tables(run_graph(spec.model, spec.model_params, spec.model_layers),
                        spec.table_scale)
