"""Scenario YAML -> validated Scenario -> numeric Problem.

A scenario names a model from the zoo, a subset of the resource catalog (with availability
caps), the workload (batch, throughput floor, samples), profile knobs and the default
scheduler. Validation is pydantic with `extra="forbid"`; every error is reported at once with
its dotted path (`workload.batch_size: must be > 0`). The exported JSON
schema ships as the package's data/scenario.schema.json (tests keep it current).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    model_validator,
)

from heterps_sim.core import limits
from heterps_sim.core.files import UserFileError, read_mapping, validation_message
from heterps_sim.core.limits import MAX_BATCH, MAX_SYNTHETIC_TYPES, MAX_UNITS
from heterps_sim.core.problem import Problem
from heterps_sim.core.spec import Cluster, ProfileOptions, Workload
from heterps_sim.inputs import catalog, custom_types, model_source
from heterps_sim.inputs.cost_section import CostsSection, unknown_types
from heterps_sim.inputs.data_section import DataSection, SyntheticData
from heterps_sim.inputs.ps_section import PsSection, build_ps, priced_ps, with_ps
from heterps_sim.inputs.roofline import DEFAULT_ALPHA, DEFAULT_EFFICIENCY, build_problem, load_trace
from heterps_sim.inputs.torch_model.section import TorchModelSection, model_kind
from heterps_sim.inputs.yaml_model import YamlLayer
from heterps_sim.inputs.zoo_params import ZooParam

# package data: found the same way in a source checkout and in an installed wheel
_DATA = resources.files("heterps_sim.inputs") / "data"
DEFAULT_SCENARIO = Path(str(_DATA / "default.yaml"))
SCHEMA_PATH = Path(str(_DATA / "scenario.schema.json"))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # no NaN/inf anywhere


class ModelSection(_Strict):
    name: str = Field(description="A zoo model (heterps_sim.inputs.zoo.model_names()) or 'synthetic'; "
                      "with `layers`, your model's own name.")
    params: dict[str, ZooParam] = Field(
        default_factory=dict, description="Zoo builder parameters, e.g. num_layers and seed for "
        "'synthetic', mlp: [256, 128] (lists for table rows and MLP widths).")
    layers: list[YamlLayer] | None = Field(
        default=None, description="A model written as building blocks (input, embedding, mlp, "
        "linear, concat, dot_interaction, scores, add, loss) instead of a zoo model.")

    @model_validator(mode="after")
    def _one_way(self) -> ModelSection:
        if self.layers is not None and self.params:
            raise ValueError("give params (a zoo model) or layers (a model in YAML), not both")
        return self


class TypeOverride(_Strict):
    price_per_hour: float | None = Field(default=None, gt=0, ge=limits.MIN_PRICE_PER_HOUR,
                                         le=limits.MAX_PRICE_PER_HOUR)
    network_gbps: float | None = Field(default=None, gt=0, description="Gbit/s per unit.",
                                       ge=limits.MIN_BYTES_PER_S * 8 / 1e9,
                                       le=limits.MAX_BYTES_PER_S * 8 / 1e9)


class SyntheticTypes(_Strict):
    count: int = Field(default=0, ge=0, description="Synthetic variants added to the selected types.")
    seed: int = Field(default=0, ge=0, le=limits.MAX_SEED)


class ClusterSection(_Strict):
    types: list[str] | Literal["all"] = Field(
        default="all", description="Catalog names or globs ('xeon-*'), or 'all'.")
    kind: Literal["cpu", "gpu"] | None = None
    available: dict[str, int | None] = Field(
        default_factory=dict, description="Units available per type name; absent = unlimited.")
    overrides: dict[str, TypeOverride] = Field(default_factory=dict)
    synthetic: SyntheticTypes = Field(default_factory=SyntheticTypes)
    define: list[custom_types.TypeDefinition] = Field(
        default_factory=list, description="Your own resource types (join the catalog's pool).")
    catalog: str | list[str] = Field(
        default_factory=list, description="CSV file(s) of your own types, columns as `define` "
        "(relative to the scenario).")


class WorkloadSection(_Strict):
    batch_size: int = Field(gt=0, description="Samples per training step.")
    throughput_limit: float = Field(gt=0, allow_inf_nan=False, description="Floor, samples/s.")
    num_samples: float = Field(gt=0, allow_inf_nan=False, description="Samples x epochs in total.")


class ProfileSection(_Strict):
    efficiency: dict[str, float] = Field(
        default_factory=dict, description=f"Fraction of peak by key; keys: {sorted(DEFAULT_EFFICIENCY)}.")
    alpha: dict[str, float] = Field(
        default_factory=dict, description=f"Amdahl parallel fraction by layer kind: {sorted(DEFAULT_ALPHA)}.")
    use_fp16: bool = False
    latency_s: float = Field(default=5e-5, ge=0, allow_inf_nan=False)
    odt_parallel: bool = True
    traces: list[str] = Field(default_factory=list, description="Measured trace CSVs (relative to the scenario).")


class ScheduleSection(_Strict):
    scheduler: str = "exact"
    mode: Literal["least", "exact"] = "least"
    pipeline: Literal["gpipe", "1f1b", "async", "auto"] = Field(
        default="gpipe", description="The pipeline schedule plans are priced and run with: "
        "gpipe and 1f1b flush every step; async never does (stale gradients); auto plans "
        "under each and keeps the cheapest.")
    seed: int = Field(default=0, ge=0, le=limits.MAX_SEED)
    options: dict = Field(default_factory=dict, description="The scheduler's Config fields.")


class ScenarioModel(_Strict):
    name: str
    description: str = ""
    model: Annotated[Annotated[ModelSection, Tag("zoo")] | Annotated[TorchModelSection, Tag("torch")],
                     Discriminator(model_kind)]
    cluster: ClusterSection = Field(default_factory=ClusterSection)
    workload: WorkloadSection
    profile: ProfileSection = Field(default_factory=ProfileSection)
    schedule: ScheduleSection = Field(default_factory=ScheduleSection)
    costs: CostsSection = Field(default_factory=CostsSection, description="The analytic model "
                                "and its unit costs (heterps_sim.inputs.cost_section).")
    data: DataSection = Field(default_factory=SyntheticData, description="Where `heterps-exec run` takes its batches from (heterps_sim.inputs.data_section).")
    ps: PsSection = Field(default_factory=PsSection, description="The parameter server of the embedding layers (heterps_sim.inputs.ps_section).")


class ScenarioError(UserFileError):
    """Bad scenario input; str() is one line naming the file, the field and the problem."""


def parse_scenario(data: dict, source: str = "<scenario>") -> ScenarioModel:
    try:
        return ScenarioModel.model_validate(data)
    except ValidationError as exc:  # paths as written: model.x, not model.<union tag>.x
        raise ScenarioError(validation_message(source, model_source.UntaggedErrors(exc))) from None


def load_scenario(path: str | Path | None = None) -> tuple[ScenarioModel, Path]:
    from heterps_sim.inputs.shipped import resolve
    path = resolve(path) if path is not None else DEFAULT_SCENARIO
    return parse_scenario(read_mapping(path), str(path)), path


def build_cluster(section: ClusterSection, source: str) -> Cluster:
    names = None if section.types == "all" else section.types
    # `all` is the 64 reference types; the instance-named AWS rows join by name or glob
    all_types = catalog.load_catalog() if names is None else catalog.load_pool()
    mine = custom_types.user_types(section.define, section.catalog, source,
                                   {t.name for t in catalog.load_pool()})
    all_types += tuple(u.type for u in mine)
    try:
        types = catalog.select(all_types, kind=section.kind, names=names)
    except KeyError as exc:
        raise ScenarioError(f"{source}: cluster.types: {exc.args[0]}") from None
    if section.synthetic.count > MAX_SYNTHETIC_TYPES:
        raise ScenarioError(f"{source}: cluster.synthetic.count: at most {MAX_SYNTHETIC_TYPES} "
                            f"synthetic types, got {section.synthetic.count}")
    if section.synthetic.count:
        types = types + catalog.synthetic_variants(types, section.synthetic.count, seed=section.synthetic.seed)
    by_name = {t.name: t for t in types}
    errors = [f"cluster.{key}.{name}: unknown resource type {name!r} (not among the selected types)"
              for key in ("available", "overrides")
              for name in getattr(section, key) if name not in by_name]
    errors += [f"cluster.available.{n}: must be 0..{MAX_UNITS:,} units or null, got {a}"
               for n, a in section.available.items() if a is not None and not 0 <= a <= MAX_UNITS]
    if errors:
        raise ScenarioError(f"{source}: " + "; ".join(errors))
    types = tuple(_override(t, section.overrides.get(t.name)) for t in types)
    if not types:
        raise ScenarioError(f"{source}: cluster: the selection matches no resource type")
    return Cluster(types=types, available=tuple(section.available.get(t.name) for t in types))


def _override(rt, ov: TypeOverride | None):
    if ov is None:
        return rt
    changes = {}
    if ov.price_per_hour is not None:
        changes["price_per_hour"] = ov.price_per_hour
    if ov.network_gbps is not None:
        changes["network_bytes_per_s"] = ov.network_gbps * 1e9 / 8
    fields = {f: getattr(rt, f) for f in rt.__dataclass_fields__}
    fields.update(changes)
    fields["estimated_fields"] = tuple(rt.estimated_fields) + tuple(f"{k}(scenario override)" for k in changes)
    return type(rt)(**fields)


def build_profile_options(section: ProfileSection, source: str) -> ProfileOptions:
    errors = [f"profile.efficiency.{k}: unknown key (known: {', '.join(sorted(DEFAULT_EFFICIENCY))})"
              for k in section.efficiency if k not in DEFAULT_EFFICIENCY]
    errors += [f"profile.efficiency.{k}: must be in (0, 1], got {v}"
               for k, v in section.efficiency.items() if not 0 < v <= 1]
    errors += [f"profile.alpha.{k}: unknown layer kind (known: {', '.join(sorted(DEFAULT_ALPHA))})"
               for k in section.alpha if k not in DEFAULT_ALPHA]
    errors += [f"profile.alpha.{k}: must be in [0, 1), got {v}"
               for k, v in section.alpha.items() if not 0 <= v < 1]
    if errors:
        raise ScenarioError(f"{source}: " + "; ".join(errors))
    return ProfileOptions(efficiency=dict(section.efficiency), alpha=dict(section.alpha),
                          use_fp16=section.use_fp16, latency_s=section.latency_s,
                          odt_parallel=section.odt_parallel)


def scenario_problem(scn: ScenarioModel, path: Path | None = None) -> Problem:
    """Everything the cost model needs for this scenario."""
    source = str(path) if path else "<scenario>"
    if isinstance(scn.model, TorchModelSection):  # a user's PyTorch module (inputs/torch_model)
        from heterps_sim.inputs.torch_model import scenario_model_spec
        model = scenario_model_spec(scn.model, source, path)
    else:
        model = model_source.section_graph(scn.model, source).to_spec()
    cluster = build_cluster(scn.cluster, source)
    options = build_profile_options(scn.profile, source)
    base = path.parent if path else Path.cwd()
    traces = []
    for k, name in enumerate(scn.profile.traces):
        try:
            traces += load_trace(base / name)
        except ValueError as exc:
            raise ScenarioError(f"{source}: profile.traces.{k}: {exc}") from None
    mine = custom_types.user_types(scn.cluster.define, scn.cluster.catalog, source, set())
    traces += custom_types.attached_traces(mine, model.name, set(cluster.type_names))
    w = scn.workload
    if w.batch_size > MAX_BATCH:
        raise ScenarioError(f"{source}: workload.batch_size: at most {MAX_BATCH:,} samples, got "
                            f"{w.batch_size:,}")
    workload = Workload(batch_size=w.batch_size, throughput_limit=w.throughput_limit,
                        num_samples=w.num_samples)
    bad = unknown_types(scn.costs, cluster.type_names)
    if bad:
        raise ScenarioError(f"{source}: " + "; ".join(bad))
    try:
        spec = build_ps(scn.ps, model=model, type_names=cluster.type_names)
    except ValueError as exc:  # names the ps.* field
        raise ScenarioError(f"{source}: {exc}") from None
    problem = with_ps(build_problem(model, cluster, workload, options, traces, name=scn.name,
                                    costs=scn.costs), spec)
    try:
        return priced_ps(problem, scn.ps)
    except ValueError as exc:
        raise ScenarioError(f"{source}: {exc}") from None


def scenario_json_schema() -> dict:
    return ScenarioModel.model_json_schema()
