"""Spot prices in the shipped catalogs: sourced, dated, below on demand, and rebuilt exactly.

traces/aws_spot_prices.csv holds one row per AWS instance and availability zone (the side file);
traces/build_catalog.py writes each AWS row's per-unit median into both catalogs and the per-instance
min / median / max into traces/aws_spot_summary.csv. These tests recompute that from the side file.
"""

from __future__ import annotations

import csv
import importlib.util
import re
import statistics
from pathlib import Path

import pytest

from heterps_sim.inputs.catalog import (
    AWS_CATALOG_PATH,
    CATALOG_PATH,
    SPOT_COLUMNS,
    CatalogError,
    load_pool,
    load_spot_prices,
    spot_prices,
)

REPO = Path(__file__).resolve().parents[3]
SIDE_FILE = REPO / "traces" / "aws_spot_prices.csv"
SUMMARY = REPO / "traces" / "aws_spot_summary.csv"
AWS_SOURCE = REPO / "traces" / "aws_instances.csv"
PINNED = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/blob/[0-9a-f]{40}/\S+$")
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def catalog_rows() -> list[dict[str, str]]:
    return read_csv(CATALOG_PATH) + read_csv(AWS_CATALOG_PATH)


def side_file_medians() -> dict[tuple[str, str], float]:
    """(instance_type, region) -> median spot USD per instance-hour over the AZs quoting one."""
    quotes: dict[tuple[str, str], list[float]] = {}
    for row in read_csv(SIDE_FILE):
        prices = quotes.setdefault((row["instance_type"], row["region"]), [])
        if row["spot_usd"].strip():
            prices.append(float(row["spot_usd"]))
    return {key: statistics.median(v) for key, v in quotes.items() if v}


def builder():
    spec = importlib.util.spec_from_file_location("build_catalog", REPO / "traces" / "build_catalog.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_side_file_rows_are_sourced_dated_and_positive():
    rows = read_csv(SIDE_FILE)
    assert rows
    for row in rows:
        assert PINNED.match(row["source"]) and ISO_DATE.match(row["date"]), row
        assert float(row["on_demand_usd"]) > 0
        assert not row["spot_usd"].strip() or float(row["spot_usd"]) > 0, row


def test_builder_puts_the_side_file_median_per_unit_in_the_catalog():
    medians = side_file_medians()
    carried = 0
    for row in catalog_rows():
        key = (row["instance_type"].strip(), row["region"].strip())
        cell = row["spot_price_per_hour_usd"]
        if row["cloud"].strip() == "AWS" and key in medians:
            expected = medians[key] / float(row["units_per_instance"])
            assert float(cell) == pytest.approx(expected, rel=1e-5), row["name"]
            carried += 1
        else:
            assert not any(row[c] for c in SPOT_COLUMNS), row["name"]
    assert carried == len(medians) == 45  # 38 reference rows + 7 instance-named AWS rows


def test_every_side_file_instance_prices_a_catalog_row_with_its_on_demand_price():
    units = {}
    for row in catalog_rows():
        if row["cloud"].strip() == "AWS":
            key = (row["instance_type"].strip(), row["region"].strip())
            units[key] = (float(row["units_per_instance"]), float(row["price_per_hour_usd"]))
    for row in read_csv(SIDE_FILE):
        n, on_demand = units[(row["instance_type"], row["region"])]  # no orphan quotes
        # the snapshot's on-demand price matches the catalog's (0.1%: l4's comes from AWS's page)
        assert float(row["on_demand_usd"]) / n == pytest.approx(on_demand, rel=1e-3), row


def test_spot_prices_are_positive_dated_sourced_and_below_on_demand():
    pool = {t.name: t for t in load_pool()}
    prices = spot_prices()
    assert len(prices) == 45
    for name, spot in prices.items():
        assert 0 < spot.price_per_hour < pool[name].price_per_hour, name
        assert ISO_DATE.match(spot.date) and PINNED.match(spot.source), name


def test_summary_keeps_min_median_max():
    medians = side_file_medians()
    rows = read_csv(SUMMARY)
    assert {(r["instance_type"], r["region"]) for r in rows} == set(medians)
    for row in rows:
        low, mid, high = (float(row[c]) for c in ("spot_min_usd", "spot_median_usd", "spot_max_usd"))
        assert low <= mid <= high and mid == pytest.approx(medians[row["instance_type"], row["region"]])
        assert 0 < int(row["azs_with_spot"]) <= int(row["azs_listed"])


def test_aws_catalog_and_summary_rebuild_byte_identical(tmp_path):
    build = builder()
    reference_columns = list(read_csv(AWS_SOURCE)[0])[: -len(build.AWS_EXTRA_COLUMNS)]
    build.build_aws(AWS_SOURCE, tmp_path / "aws.csv", reference_columns)
    assert (tmp_path / "aws.csv").read_bytes() == AWS_CATALOG_PATH.read_bytes()
    build.build_spot_summary(tmp_path / "summary.csv")
    assert (tmp_path / "summary.csv").read_bytes() == SUMMARY.read_bytes()


def test_loader_reads_no_spot_prices_from_a_file_without_the_columns(tmp_path):
    path = tmp_path / "old.csv"
    rows = read_csv(CATALOG_PATH)
    columns = [c for c in rows[0] if c not in SPOT_COLUMNS]
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    assert load_spot_prices(path) == {}


def test_loader_rejects_a_spot_price_without_date(tmp_path):
    rows = read_csv(CATALOG_PATH)
    t4 = next(r for r in rows if r["name"] == "t4")
    t4["spot_price_date"] = ""
    path = tmp_path / "broken.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with pytest.raises(CatalogError, match=r"broken\.csv.*'t4'.*spot_price_date"):
        load_spot_prices(path)
