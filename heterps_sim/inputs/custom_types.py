"""Your own resource types: defined in the scenario or in a CSV file it names, with units.

    cluster:
      types: [onprem-a10, xeon-icelake-16vcpu]
      define:
        - {name: onprem-a10, kind: gpu, peak_fp32_tflops: 31.2, peak_fp16_tflops: 125,
           memory_gb: 24, memory_bandwidth_gb_per_s: 600, host_link_gb_per_s: 32,
           network_gbit_per_s: 25, price_per_hour_usd: 0.45, trace: a10-profile.csv}
      catalog: my-types.csv          # or a list; columns are the fields above

Every figure is a positive finite number in the unit its name says; the conversion to SI is
the shipped catalog's (`catalog.NUMERIC_COLUMNS`: TFLOPS x 1e12, GB x 1e9, GB/s x 1e9,
Gbit/s x 1e9 / 8), so a type defined with a catalog row's figures is that catalog type under
another name, bit for bit. A GPU needs its host link; a CPU has none. `peak_fp16_tflops` may be
left out (no fast fp16 path: the fp32 peak, listed in `estimated_fields`). Defined types join
the catalog's pool that `cluster.types` and `cluster.kind` select from; a name may not repeat
a catalog type (`cluster.overrides` changes a catalog type's price or network).

`trace:` attaches a measured profile (the trace CSV `heterps-exec profile --as-type NAME`
writes): its rows become this type's measurements and beat the roofline wherever they name a
layer of the scenario's model. Bad input is one line naming the file, the entry and the field.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from heterps_sim.core import limits
from heterps_sim.core.files import UserFileError
from heterps_sim.core.spec import ResourceType
from heterps_sim.inputs.catalog import NUMERIC_COLUMNS

_FIGURE = {"gt": 0, "allow_inf_nan": False}
# Each figure within the stated ranges of core/limits.py, in the field's own unit, so a value
# no machine has (a price of 1e-308 USD/h) is refused naming the field it was written in.
_TFLOPS = {"ge": 1e-6, "le": 1e6}
"""1 MFLOP/s to 1 EFLOP/s per unit."""
_GB = {"ge": limits.MIN_MEMORY_BYTES / 1e9, "le": limits.MAX_BYTES / 1e9}
_GB_PER_S = {"ge": limits.MIN_BYTES_PER_S / 1e9, "le": limits.MAX_BYTES_PER_S / 1e9}
_GBIT_PER_S = {"ge": limits.MIN_BYTES_PER_S * 8 / 1e9, "le": limits.MAX_BYTES_PER_S * 8 / 1e9}
_USD = {"ge": limits.MIN_PRICE_PER_HOUR, "le": limits.MAX_PRICE_PER_HOUR}

FIELD_COLUMNS = {
    # field of a definition -> the shipped catalog's column (its unit and SI factor)
    "peak_fp32_tflops": "peak_fp32_tflops",
    "peak_fp16_tflops": "peak_fp16_or_bf16_tensor_tflops",
    "memory_gb": "mem_gb",
    "memory_bandwidth_gb_per_s": "mem_bw_gbps",
    "host_link_gb_per_s": "host_link_gbps",
    "network_gbit_per_s": "network_gbps",
    "price_per_hour_usd": "price_per_hour_usd",
}


class TypeDefinition(BaseModel):
    """One resource type of your own (a scenario's `cluster.define` entry or a CSV row)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+~-]*$", max_length=80,
                      description="Letters, digits and . _ + ~ - (no spaces or glob characters).")
    kind: Literal["cpu", "gpu"]
    peak_fp32_tflops: float = Field(**_FIGURE, **_TFLOPS, description="Peak dense fp32, TFLOP/s per unit.")
    peak_fp16_tflops: float | None = Field(
        default=None, **_FIGURE, **_TFLOPS, description="Peak fp16/bf16 (tensor cores), TFLOP/s; default: fp32.")
    memory_gb: float = Field(**_FIGURE, **_GB, description="Device memory (GPU) or RAM (CPU), GB (1e9 B).")
    memory_bandwidth_gb_per_s: float = Field(**_FIGURE, **_GB_PER_S, description="Memory bandwidth, GB/s.")
    host_link_gb_per_s: float | None = Field(
        default=None, **_FIGURE, **_GB_PER_S, description="Host-device link (PCIe), GB/s; GPUs only, required there.")
    network_gbit_per_s: float = Field(**_FIGURE, **_GBIT_PER_S, description="Network per unit, Gbit/s.")
    price_per_hour_usd: float = Field(**_FIGURE, **_USD, description="USD per unit-hour (yours: "
                                       "amortised or negotiated).")
    vendor: str = ""
    arch: str = ""
    year: int = Field(default=0, ge=0)
    source: str = Field(default="", description="Where the figures come from (URLs, notes).")
    trace: str | None = Field(default=None, description="A measured profile CSV for this type "
                              "(relative to the file that defines it).")

    @model_validator(mode="after")
    def _host_link(self) -> TypeDefinition:
        if self.kind == "gpu" and self.host_link_gb_per_s is None:
            raise ValueError("host_link_gb_per_s: required for a gpu (its PCIe/NVLink-C2C link)")
        if self.kind == "cpu" and self.host_link_gb_per_s is not None:
            raise ValueError("host_link_gb_per_s: only for kind gpu (a CPU's data is in RAM)")
        return self

    def resource_type(self, where: str) -> ResourceType:
        """The type in SI units, converted exactly as the shipped catalog converts."""
        si = {}
        for fld, column in FIELD_COLUMNS.items():
            attr, factor = NUMERIC_COLUMNS[column]
            value = getattr(self, fld)
            if fld == "peak_fp16_tflops" and value is None:
                value = self.peak_fp32_tflops
            si[attr] = None if value is None else value * factor
        return ResourceType(
            name=self.name, kind=self.kind, vendor=self.vendor, arch=self.arch, year=self.year,
            estimated_fields=("peak_flops_fp16",) if self.peak_fp16_tflops is None else (),
            source_urls=(f"user-defined ({where})",
                         *(s.strip() for s in self.source.split(";") if s.strip())),
            **si)


class CustomTypeError(UserFileError):
    """A user-defined type that cannot be used; one line naming file, entry and field."""


@dataclass(frozen=True, slots=True)
class UserType:
    """A defined type, where it was defined, and its attached measured profile (if any)."""

    type: ResourceType
    where: str
    """"FILE: cluster.define.K" or "FILE: row N": the place error messages name."""
    trace: Path | None = None


def _base(source: str) -> Path:
    return Path(source).parent if source and not source.startswith("<") else Path.cwd()


def _user_type(d: TypeDefinition, where: str, base: Path) -> UserType:
    try:
        rt = d.resource_type(where)
    except ValueError as exc:  # spec's last-resort checks; pydantic has caught the rest
        raise CustomTypeError(f"{where}: {exc}") from None
    return UserType(type=rt, where=where, trace=None if d.trace is None else base / d.trace)


def read_type_csv(path: Path) -> list[UserType]:
    """The types of a CSV whose columns are TypeDefinition's fields (blank cell = left out)."""
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            columns = list(reader.fieldnames or [])
            rows = list(reader)
    except FileNotFoundError:
        raise CustomTypeError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise CustomTypeError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    known = list(TypeDefinition.model_fields)
    unknown = [c for c in columns if c not in known]
    if unknown:
        raise CustomTypeError(f"{path}: unknown column {unknown[0]!r} (columns: {', '.join(known)})")
    if not rows:
        raise CustomTypeError(f"{path}: no resource types (a header and one row per type)")
    out = []
    for n, row in enumerate(rows, start=2):
        where = f"{path}: line {n}"
        if None in row:
            raise CustomTypeError(f"{where}: more cells than columns")
        cells = {k: v.strip() for k, v in row.items() if v is not None and v.strip()}
        try:
            d = TypeDefinition.model_validate(cells)
        except ValidationError as exc:
            raise CustomTypeError(f"{where}: {_problems(exc, 'column ')}") from None
        out.append(_user_type(d, f"{where} ({d.name})", path.parent))
    return out


def _problems(exc: ValidationError, prefix: str) -> str:
    parts = []
    for e in exc.errors():
        msg = e["msg"].removeprefix("Value error, ")
        loc = ".".join(str(x) for x in e["loc"])
        parts.append(f"{prefix}{loc!r}: {msg}" if loc else msg)
    return "; ".join(parts)


def user_types(define: list[TypeDefinition], catalogs: str | list[str], source: str,
               taken: set[str]) -> list[UserType]:
    """The scenario's own types, in order: `define` entries, then each catalog file's rows.
    `taken` holds the shipped catalog's names, which a user type may not reuse."""
    base = _base(source)
    found = [_user_type(d, f"{source}: cluster.define.{k}", base) for k, d in enumerate(define)]
    for k, name in enumerate([catalogs] if isinstance(catalogs, str) else catalogs):
        path = base / name
        field = "cluster.catalog" if isinstance(catalogs, str) else f"cluster.catalog.{k}"
        if not path.is_file():
            raise CustomTypeError(f"{source}: {field}: {path}: no such file")
        found += read_type_csv(path)
    seen: dict[str, str] = {}
    for u in found:
        name = u.type.name
        if name in taken:
            raise CustomTypeError(f"{u.where}: name {name!r} is a catalog type; pick another "
                                  "name (cluster.overrides changes a catalog type's price)")
        if name in seen:
            raise CustomTypeError(f"{u.where}: type {name!r} is defined twice (also at {seen[name]})")
        seen[name] = u.where
    return found


def attached_traces(types: list[UserType], model_name: str, selected: set[str]) -> list[dict]:
    """Rows of each selected type's attached profile, relabelled with the type's name.

    A profile measures one device: rows naming several resources are refused, as is a profile
    with no row for this model (it would silently leave the roofline in place)."""
    from heterps_sim.inputs.roofline import load_trace
    rows = []
    for u in types:
        if u.trace is None or u.type.name not in selected:
            continue
        try:
            trace = load_trace(u.trace)
        except UserFileError as exc:
            raise CustomTypeError(f"{u.where}: trace: {exc}") from None
        labels = sorted({r["resource"] for r in trace})
        if len(labels) > 1:
            raise CustomTypeError(f"{u.where}: trace {u.trace} holds rows of several resources "
                                  f"({', '.join(labels)}); attach one device's profile")
        mine = [r for r in trace if r["model"] == model_name]
        if not mine:
            models = sorted({r["model"] for r in trace}) or ["none"]
            raise CustomTypeError(f"{u.where}: trace {u.trace} has no row for model "
                                  f"{model_name!r} (its rows are for {', '.join(models)})")
        rows += [{**r, "resource": u.type.name} for r in mine]
    return rows
