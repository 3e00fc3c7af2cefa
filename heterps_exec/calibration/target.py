"""What `heterps-exec profile` measures and which resource type the measurements describe.

    graph, resource = profile_target(scenario="s.yaml", model="", as_type="onprem-a10", device="cuda:0")

With `--scenario`, the scenario's own model (a zoo model with its params, layers written in
YAML, or a PyTorch module: then a calibration/user_profiler.UserTarget) is measured, and
`--as-type` must name one of the scenario's resource types (catalog or defined), so the trace that comes out is one the scenario uses: its rows beat the roofline
for that type. With `--model`, a zoo model by name, labelled `--as-type` or, by default,
`local-<device>`. A scenario's batch size is where its measurements are measured (unless
`--batch` says otherwise), so the cost model uses them as they are. Every problem is one line naming the flag. No torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from heterps_sim.core.files import UserFileError
from heterps_sim.inputs.graph import ModelGraph

if TYPE_CHECKING:
    from heterps_exec.calibration.user_profiler import UserTarget


class TargetError(UserFileError):
    """A profile target that cannot be measured; one line naming the flag."""


def profile_target(*, scenario: str, model: str, as_type: str,
                   device: str) -> tuple[ModelGraph | UserTarget, str, int | None]:
    """(the graph to measure, or a user model's UserTarget; the resource name its rows
    carry; the scenario's batch size or None for a zoo model)."""
    if bool(scenario) == bool(model):
        raise TargetError("profile: give --scenario S.yaml (its model) or --model NAME (a zoo "
                          "model), one of them")
    if model:
        from heterps_sim.inputs import zoo
        try:
            graph = zoo.model_graph(model)
        except KeyError as exc:
            raise TargetError(f"--model: {exc.args[0]}") from None
        return graph, as_type or f"local-{device.replace(':', '')}", None
    from heterps_sim.inputs.model_source import section_graph
    from heterps_sim.inputs.scenario import build_cluster, load_scenario
    if scenario.endswith(".json"):
        raise TargetError(f"--scenario: {scenario} is a problem JSON; give the scenario YAML "
                          "(the model's layers)")
    # the cluster, not the whole problem: the trace this run writes may not exist yet
    scn, _ = load_scenario(scenario)
    types = build_cluster(scn.cluster, scenario).type_names
    if not as_type:
        raise TargetError(f"--as-type: name the resource type these measurements describe, "
                          f"one of the scenario's: {', '.join(types)}")
    if as_type not in types:
        raise TargetError(f"--as-type: {as_type!r} is not a resource type of {scenario} (its "
                          f"types: {', '.join(types)}); define it under cluster.define")
    if getattr(scn.model, "module", None):  # a PyTorch module: captured (torch from here)
        from heterps_exec.calibration.user_profiler import user_target
        return user_target(scn.model, scenario), as_type, scn.workload.batch_size
    return section_graph(scn.model, scenario), as_type, scn.workload.batch_size
