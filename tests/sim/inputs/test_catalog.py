"""The resource catalog: the committed CSV, its SI loading, filters and synthetic variants."""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import pytest

from heterps_sim.inputs.catalog import (
    CATALOG_PATH,
    SPOT_COLUMNS,
    CatalogError,
    catalog_frame,
    load_catalog,
    select,
    synthetic_variants,
)

REPO = Path(__file__).resolve().parents[3]
SOURCE = REPO.parent / "shared" / "data" / "resource_catalog.csv"
BUILDER = REPO / "traces" / "build_catalog.py"
NEEDED = ("peak_fp32_tflops", "peak_fp16_or_bf16_tensor_tflops", "mem_gb", "mem_bw_gbps",
          "network_gbps", "price_per_hour_usd")


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_counts(catalog):
    assert len(catalog) == 64
    assert len(select(catalog, kind="gpu")) == 34
    assert len(select(catalog, kind="cpu")) == 30
    assert len({t.name for t in catalog}) == 64


def test_si_conversion_of_t4(catalog):
    (t4,) = select(catalog, names=["t4"])
    assert t4.kind == "gpu" and t4.year == 2018 and t4.vendor == "NVIDIA"
    assert t4.peak_flops_fp32 == pytest.approx(8.1e12)
    assert t4.peak_flops_fp16 == pytest.approx(65e12)
    assert t4.memory_bytes == pytest.approx(16e9)
    assert t4.memory_bandwidth_bytes_per_s == pytest.approx(320e9)
    assert t4.host_link_bytes_per_s == pytest.approx(15.75e9)
    assert t4.network_bytes_per_s == pytest.approx(12.5e9 / 8)
    assert t4.price_per_hour == pytest.approx(0.978)
    assert t4.source_urls and all(u.startswith("https://") for u in t4.source_urls)


def test_cpu_has_no_host_link_and_gpu_always_has_one(catalog):
    assert all(t.host_link_bytes_per_s is None for t in select(catalog, kind="cpu"))
    assert all(t.host_link_bytes_per_s > 0 for t in select(catalog, kind="gpu"))


def test_no_blank_cell_the_cost_model_needs():
    for row in read_csv(CATALOG_PATH):
        needed = NEEDED + (("host_link_gbps",) if row["kind"] == "gpu" else ())
        blank = [c for c in needed if not row[c].strip()]
        assert not blank, f"{row['name']}: blank {blank}"


def test_estimated_fields_parsed_to_attribute_names(catalog):
    by_name = {t.name: t for t in catalog}
    assert by_name["gaudi2"].estimated_fields == (
        "price_per_hour", "peak_flops_fp32", "network_bytes_per_s")
    assert "peak_flops_fp16" in by_name["p4"].estimated_fields  # note held a ';'
    assert by_name["t4"].estimated_fields == ()


@pytest.mark.skipif(not SOURCE.is_file(), reason="../shared/data is absent (e.g. a CI clone)")
def test_every_filled_cell_is_marked_estimated():
    source = {r["name"]: r for r in read_csv(SOURCE)}
    built = read_csv(CATALOG_PATH)
    assert [r["name"] for r in built] == list(source)
    filled = 0
    for row in built:
        for column, value in row.items():
            if column in SPOT_COLUMNS:  # appended from traces/aws_spot_prices.csv, not filled
                continue
            original = source[row["name"]][column]
            if column == "estimated_fields" or value == original:
                continue
            assert not original.strip(), f"{row['name']}.{column}: a source value was changed"
            assert f"{column}(rule:" in row["estimated_fields"], f"{row['name']}.{column}"
            filled += 1
    assert filled == 22  # 19 network + 2 fp32 + 1 bf16


@pytest.mark.skipif(not SOURCE.is_file(), reason="../shared/data is absent (e.g. a CI clone)")
def test_rebuild_reproduces_committed_csv(tmp_path):
    out = tmp_path / "catalog.csv"
    subprocess.run([sys.executable, str(BUILDER), "--source", str(SOURCE), "--out", str(out)],
                   check=True, capture_output=True)
    assert out.read_bytes() == CATALOG_PATH.read_bytes()


def test_select_by_kind_glob_and_order(catalog):
    xeons = select(catalog, names="xeon-*")
    assert xeons and all(t.name.startswith("xeon-") and t.kind == "cpu" for t in xeons)
    picked = select(catalog, names=["t4", "graviton*", "t4"])
    assert picked[0].name == "t4" and len(picked) == 1 + 6
    assert [t.name for t in select(catalog, kind="gpu", names=["l4*", "a10?"])] == ["l4", "l40s", "a10g"]


def test_select_unknown_name_raises_keyerror(catalog):
    with pytest.raises(KeyError, match="no-such-gpu"):
        select(catalog, names=["t4", "no-such-gpu"])
    with pytest.raises(KeyError, match="xeon-"):
        select(catalog, kind="gpu", names=["xeon-*"])
    with pytest.raises(ValueError):
        select(catalog, kind="tpu")


def test_synthetic_variants_deterministic_and_counted(catalog):
    a = synthetic_variants(catalog, 100, seed=7)
    assert a == synthetic_variants(catalog, 100, seed=7)
    assert a != synthetic_variants(catalog, 100, seed=8)
    assert len(a) == 100 and len({t.name for t in a}) == 100
    assert a[0].name == f"{catalog[0].name}~v1" and a[64].name == f"{catalog[0].name}~v2"
    assert all(t.estimated_fields[0] == "synthetic" for t in a)
    assert synthetic_variants(catalog, 0, seed=1) == ()


@pytest.mark.parametrize("spread", [0.1, 0.25, 0.6])
def test_variant_price_performance_stays_near_base(catalog, spread):
    bound = math.exp(1.5 * spread)  # documented in synthetic_variants
    base = {t.name: t for t in catalog}
    variants = synthetic_variants(catalog, 256, seed=3, spread=spread)
    for v in variants:
        b = base[v.name.split("~")[0]]
        ratio = (v.price_per_hour / v.peak_flops_fp32) / (b.price_per_hour / b.peak_flops_fp32)
        assert 1 / bound <= ratio <= bound, v.name
        assert v.kind == b.kind and (v.host_link_bytes_per_s is None) == (b.host_link_bytes_per_s is None)
    speeds = [v.peak_flops_fp32 / base[v.name.split("~")[0]].peak_flops_fp32 for v in variants]
    assert max(speeds) / min(speeds) > 1 + spread  # the speed factor really varies


def test_catalog_frame(catalog):
    frame = catalog_frame(catalog)
    assert list(frame.columns) == ["name", "kind", "fp32 TFLOPS", "fp16 TFLOPS", "memory GB",
                                   "memory BW GB/s", "host link GB/s", "network Gbit/s", "$/hour",
                                   "estimated"]
    t4 = frame.set_index("name").loc["t4"]
    assert t4["fp32 TFLOPS"] == pytest.approx(8.1) and t4["network Gbit/s"] == pytest.approx(12.5)
    assert frame.set_index("name")["host link GB/s"].isna().sum() == 30


def write_broken(tmp_path: Path, edit) -> Path:
    rows = read_csv(CATALOG_PATH)
    columns = list(rows[0])
    columns, rows = edit(columns, rows)
    path = tmp_path / "broken.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_catalog_error_on_missing_column(tmp_path):
    path = write_broken(tmp_path, lambda cols, rows: ([c for c in cols if c != "mem_gb"], rows))
    with pytest.raises(CatalogError, match=r"broken\.csv.*mem_gb"):
        load_catalog(path)


def test_catalog_error_on_non_numeric_price(tmp_path):
    def edit(cols, rows):
        rows[6]["price_per_hour_usd"] = "cheap"
        return cols, rows
    with pytest.raises(CatalogError, match=r"broken\.csv.*'t4'.*price_per_hour_usd.*cheap"):
        load_catalog(write_broken(tmp_path, edit))


def test_catalog_error_on_blank_gpu_host_link(tmp_path):
    def edit(cols, rows):
        rows[0]["host_link_gbps"] = ""
        return cols, rows
    with pytest.raises(CatalogError, match=r"'k80'.*host_link_gbps"):
        load_catalog(write_broken(tmp_path, edit))


def test_catalog_error_on_missing_file(tmp_path):
    with pytest.raises(CatalogError, match="nowhere.csv"):
        load_catalog(tmp_path / "nowhere.csv")
