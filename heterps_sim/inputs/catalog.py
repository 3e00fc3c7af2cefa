"""The resource catalog: the 64 real rentable types, filters over them, and synthetic variants.

`load_catalog()` reads the package's data/resource_catalog.csv (built by traces/build_catalog.py from the
sourced data; traces/README.md documents its columns and fill rules) and returns frozen
`ResourceType`s in SI units:

- TFLOPS x 1e12 -> FLOP/s;
- mem_gb x 1e9 -> bytes. "GB" is decimal (1e9) throughout: bandwidths are vendor GB/s = 1e9 B/s,
  and capacities are taken as marketed. Device capacities are really binary (a "16 GB" T4 has
  16 GiB = 17.2e9 B) but drivers and ECC reserve part of it, so 1e9 is the usable-side choice,
  about 7% conservative; AWS VM RAM (GiB) is treated the same way;
- mem_bw_gbps and host_link_gbps are GB/s (gigaBYTES) x 1e9 -> bytes/s;
- network_gbps is Gbit/s per unit x 1e9 / 8 -> bytes/s;
- price_per_hour_usd is USD per unit-hour, as is; so is spot_price_per_hour_usd, which
  `load_spot_prices()` returns with its date and source (AWS rows only; traces/README.md).

`estimated_fields` holds `ResourceType` attribute names (peak_flops_fp32, network_bytes_per_s,
...) for the cost-model figures, and the CSV column name for the others (tdp_w, ...); the notes
saying why stay in the CSV. `select()` picks types by kind and name globs;
`synthetic_variants()` makes more types than 64 for scaling studies; `catalog_frame()` is a
printable table. No simpy, no torch.
"""

from __future__ import annotations

import csv
import fnmatch
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from heterps_sim.core.files import UserFileError
from heterps_sim.core.spec import RESOURCE_KINDS, ResourceType

# package data: found the same way in a source checkout and in an installed wheel
CATALOG_PATH = Path(str(resources.files("heterps_sim.inputs") / "data" / "resource_catalog.csv"))
AWS_CATALOG_PATH = Path(str(resources.files("heterps_sim.inputs") / "data"
                            / "resource_catalog_aws.csv"))
"""Instance-named AWS rows (r7i-8xlarge, ...: traces/aws_instances.csv, with each price's date
and source). Not among the 64 reference types that `types: all` means; a scenario names them,
or a glob matching them."""
MEMORY_OPTIMISED_FAMILIES = ("r", "x", "u-", "z")
"""AWS instance families whose names start so are memory-optimised (r7i, r6i, x2idn, ...):
the default candidates for hosting a parameter server (inputs/ps_section.py)."""

# CSV column -> (ResourceType attribute, factor to SI)
NUMERIC_COLUMNS = {
    "peak_fp32_tflops": ("peak_flops_fp32", 1e12),
    "peak_fp16_or_bf16_tensor_tflops": ("peak_flops_fp16", 1e12),
    "mem_gb": ("memory_bytes", 1e9),
    "mem_bw_gbps": ("memory_bandwidth_bytes_per_s", 1e9),
    "host_link_gbps": ("host_link_bytes_per_s", 1e9),
    "network_gbps": ("network_bytes_per_s", 1e9 / 8),
    "price_per_hour_usd": ("price_per_hour", 1.0),
}
REQUIRED_COLUMNS = ("name", "kind", "vendor", "generation_arch", "year", *NUMERIC_COLUMNS,
                    "estimated_fields", "source_urls")
SYNTHETIC = "synthetic"
"""First entry of a synthetic variant's `estimated_fields`."""
SPOT_COLUMNS = ("spot_price_per_hour_usd", "spot_price_date", "spot_price_source")
"""A row's spot price per unit-hour (USD), the day it was read and where (all three or none)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SpotPrice:
    """One type's spot price, as a pinned snapshot of AWS's spot market quoted it."""

    price_per_hour: float
    """USD per unit-hour: the median over the region's availability zones of the instance's
    spot price, divided by the units per instance (traces/aws_spot_summary.csv keeps min/max)."""
    date: str
    """The day the price was read from `source` (ISO date); not when AWS quoted it."""
    source: str
    """Pinned URL of the snapshot the price was read from."""


class CatalogError(UserFileError):
    """A catalog file that cannot be read; the message names the file, row and column."""


def split_entries(text: str) -> list[str]:
    """Split an `estimated_fields` cell on ';' outside parentheses (notes may hold ';')."""
    entries, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if ch == ";" and depth == 0:
            entries.append(text[start:i])
            start = i + 1
    entries.append(text[start:])
    return [e.strip() for e in entries if e.strip()]


def _cell(row: dict[str, str], column: str) -> str:
    """The stripped text of a cell; "" for a short row's missing trailing cells."""
    return (row.get(column) or "").strip()


def _estimated_names(row: dict[str, str]) -> tuple[str, ...]:
    """Attribute (or column) names of the row's estimated cells, in order, without notes."""
    names = [entry.split("(", 1)[0].strip()
             for entry in split_entries(_cell(row, "estimated_fields"))]
    if _cell(row, "price_estimated").lower() == "yes":
        names.append("price_per_hour_usd")
    mapped = [NUMERIC_COLUMNS[n][0] if n in NUMERIC_COLUMNS else n for n in names]
    return tuple(dict.fromkeys(mapped))


def _number(row: dict[str, str], column: str, where: str, *, optional: bool = False) -> float | None:
    """The cell as a positive float; blank -> None when optional; else CatalogError."""
    text = _cell(row, column)
    if not text and optional:
        return None
    try:
        value = float(text)
    except ValueError:
        raise CatalogError(f"{where}, column {column!r}: expected a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise CatalogError(f"{where}, column {column!r}: must be a positive number, got {text!r}")
    return value


def _row_to_type(row: dict[str, str], where: str) -> ResourceType:
    kind = _cell(row, "kind")
    if kind not in RESOURCE_KINDS:
        raise CatalogError(f"{where}, column 'kind': must be one of {RESOURCE_KINDS}, got {kind!r}")
    si = {}
    for column, (attr, factor) in NUMERIC_COLUMNS.items():
        value = _number(row, column, where, optional=(column == "host_link_gbps" and kind == "cpu"))
        si[attr] = None if value is None else value * factor
    year = _cell(row, "year")
    if not year.isdigit():
        raise CatalogError(f"{where}, column 'year': expected a whole year, got {year!r}")
    return ResourceType(
        name=_cell(row, "name"), kind=kind, vendor=_cell(row, "vendor"),
        arch=_cell(row, "generation_arch"), year=int(year),
        estimated_fields=_estimated_names(row),
        source_urls=tuple(u.strip() for u in _cell(row, "source_urls").split(";") if u.strip()),
        **si)


def load_catalog(path: str | Path | None = None) -> tuple[ResourceType, ...]:
    """The resource types of a catalog CSV (default: the shipped CATALOG_PATH), in SI."""
    path = Path(path) if path is not None else CATALOG_PATH
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise CatalogError(f"{path}: missing column(s) {missing}")
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise CatalogError(f"{path}: cannot read the catalog ({reason})") from exc
    types, seen = [], set()
    for number, row in enumerate(rows, start=1):
        name = _cell(row, "name")
        where = f"{path}: row {name!r} (data row {number})"
        if not name or name in seen:
            raise CatalogError(f"{where}, column 'name': {'duplicate' if name else 'blank'} name")
        seen.add(name)
        types.append(_row_to_type(row, where))
    if not types:
        raise CatalogError(f"{path}: no resource types")
    return tuple(types)


def load_pool() -> tuple[ResourceType, ...]:
    """The 64 reference types, then the instance-named AWS rows: what scenarios pick from."""
    return load_catalog() + load_catalog(AWS_CATALOG_PATH)


def load_spot_prices(path: str | Path | None = None) -> dict[str, SpotPrice]:
    """The spot prices of a catalog CSV's rows that carry one (default: the shipped CATALOG_PATH),
    by type name. A file without the spot columns has none; a row filling only some of them, or a
    price that is not a positive number, raises CatalogError."""
    path = Path(path) if path is not None else CATALOG_PATH
    try:
        with path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise CatalogError(f"{path}: cannot read the catalog ({reason})") from exc
    prices = {}
    for number, row in enumerate(rows, start=1):
        cells = [_cell(row, c) for c in SPOT_COLUMNS]
        if not any(cells):
            continue
        where = f"{path}: row {_cell(row, 'name')!r} (data row {number})"
        if not all(cells):
            blank = [c for c, v in zip(SPOT_COLUMNS, cells) if not v]
            raise CatalogError(f"{where}: a spot price needs {', '.join(SPOT_COLUMNS)}; blank {blank}")
        price = _number(row, SPOT_COLUMNS[0], where)
        prices[_cell(row, "name")] = SpotPrice(price_per_hour=price, date=cells[1], source=cells[2])
    return prices


def spot_prices() -> dict[str, SpotPrice]:
    """Spot prices of the shipped types (the 64 reference types, then the AWS rows), by name."""
    return load_spot_prices() | load_spot_prices(AWS_CATALOG_PATH)


def memory_optimised_names() -> frozenset[str]:
    """Names of the shipped types rented as memory-optimised AWS instances (by family)."""
    names = set()
    for path in (CATALOG_PATH, AWS_CATALOG_PATH):
        with path.open(newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                family = _cell(row, "instance_type").split(".", 1)[0]
                if _cell(row, "cloud") == "AWS" and family.startswith(MEMORY_OPTIMISED_FAMILIES):
                    names.add(_cell(row, "name"))
    return frozenset(names)


def select(types: Sequence[ResourceType], *, kind: str | None = None,
           names: str | Iterable[str] | None = None) -> tuple[ResourceType, ...]:
    """Types of `kind` (if given) matching `names` (exact names or fnmatch globs like "xeon-*").

    With names, the result follows the order of the patterns (each pattern's matches in catalog
    order, each type once); without, catalog order. A name or glob matching nothing (among types
    of `kind`) raises KeyError naming it.
    """
    if kind is not None and kind not in RESOURCE_KINDS:
        raise ValueError(f"kind must be one of {RESOURCE_KINDS}, got {kind!r}")
    pool = [t for t in types if kind is None or t.kind == kind]
    if names is None:
        return tuple(pool)
    chosen: dict[str, ResourceType] = {}
    for pattern in [names] if isinstance(names, str) else list(names):
        hits = [t for t in pool if t.name == pattern or fnmatch.fnmatchcase(t.name, pattern)]
        if not hits:
            among = f" among {kind} types" if kind else ""
            raise KeyError(f"no resource type matches {pattern!r}{among}")
        chosen.update((t.name, t) for t in hits if t.name not in chosen)
    return tuple(chosen.values())


def _clipped_lognormal(rng: np.random.Generator, sigma: float) -> float:
    """exp(N(0, sigma)) with the normal clipped to +-3 sigma (so bounds are guaranteed)."""
    return float(np.exp(np.clip(rng.normal(0.0, sigma), -3 * sigma, 3 * sigma)))


def synthetic_variants(types: Sequence[ResourceType], count: int, *, seed: int,
                       spread: float = 0.25) -> tuple[ResourceType, ...]:
    """`count` new types derived from `types`, for studies with more than the 64 real ones.

    Variant i derives from base types[i % len(types)] and is named "<base>~v<n>" (n = 1, 2, ...
    per base). One shared log-normal speed factor s = exp(N(0, spread)) scales compute (fp32 and
    fp16 alike, so the fp16:fp32 ratio is kept) and memory bandwidth; small independent factors
    exp(N(0, spread/4)) perturb compute, memory bandwidth, memory capacity, host link, network
    and price. Price = base price x s x its own factor, so price per FLOP/s stays near the
    base's: every normal is clipped at 3 sigma, hence price per fp32 FLOP/s is within a factor
    exp(1.5 x spread) of the base's (1.45 at the default 0.25). Deterministic per seed;
    `estimated_fields` is ("synthetic", every numeric attribute).
    """
    if count < 0 or spread < 0:
        raise ValueError("synthetic_variants: count and spread must be >= 0")
    if count and not types:
        raise ValueError("synthetic_variants: no base types to derive from")
    rng = np.random.default_rng(seed)
    small = spread / 4
    variants = []
    for i in range(count):
        base = types[i % len(types)]
        speed = _clipped_lognormal(rng, spread)
        compute, mem_bw, memory, link, network, price = (
            _clipped_lognormal(rng, small) for _ in range(6))
        host_link = None if base.host_link_bytes_per_s is None else base.host_link_bytes_per_s * link
        variants.append(ResourceType(
            name=f"{base.name}~v{i // len(types) + 1}", kind=base.kind, vendor=base.vendor,
            arch=base.arch, year=base.year, source_urls=base.source_urls,
            peak_flops_fp32=base.peak_flops_fp32 * speed * compute,
            peak_flops_fp16=base.peak_flops_fp16 * speed * compute,
            memory_bytes=base.memory_bytes * memory,
            memory_bandwidth_bytes_per_s=base.memory_bandwidth_bytes_per_s * speed * mem_bw,
            host_link_bytes_per_s=host_link,
            network_bytes_per_s=base.network_bytes_per_s * network,
            price_per_hour=base.price_per_hour * speed * price,
            estimated_fields=(SYNTHETIC, *(attr for attr, _ in NUMERIC_COLUMNS.values()
                                           if attr != "host_link_bytes_per_s" or host_link))))
    return tuple(variants)


def catalog_frame(types: Iterable[ResourceType]) -> pd.DataFrame:
    """A printable table of `types` in human units (one row per type, catalog order)."""
    rows = [{
        "name": t.name, "kind": t.kind,
        "fp32 TFLOPS": t.peak_flops_fp32 / 1e12, "fp16 TFLOPS": t.peak_flops_fp16 / 1e12,
        "memory GB": t.memory_bytes / 1e9, "memory BW GB/s": t.memory_bandwidth_bytes_per_s / 1e9,
        "host link GB/s": (math.nan if t.host_link_bytes_per_s is None
                           else t.host_link_bytes_per_s / 1e9),
        "network Gbit/s": t.network_bytes_per_s * 8 / 1e9, "$/hour": t.price_per_hour,
        "estimated": len(t.estimated_fields),
    } for t in types]
    columns = ["name", "kind", "fp32 TFLOPS", "fp16 TFLOPS", "memory GB", "memory BW GB/s",
               "host link GB/s", "network Gbit/s", "$/hour", "estimated"]
    return pd.DataFrame(rows, columns=columns)
