"""Build the shipped catalog (heterps_sim/inputs/data/resource_catalog.csv, package data) from
the sourced catalog, filling blank cells by rule.

Usage (from the repository root):

    .venv/bin/python traces/build_catalog.py [--source PATH] [--out PATH]

The source (default ../shared/data/resource_catalog.csv next to the repository) holds 64 real
resource types with source URLs. This script keeps every row, every column and every source
cell as written, and fills the blanks the cost model needs by the rules below. Each filled cell
is appended to its row's `estimated_fields` as `column(rule:NAME)`, so an estimate is never
mistaken for a published figure. The output is deterministic: running it twice gives the same
bytes (tests/sim/inputs/test_catalog.py checks the committed CSV against a rebuild).

Units stay human, as in the source: TFLOPS; mem_gb in GB; mem_bw_gbps and host_link_gbps in
GB/s (gigaBYTES per second; PCIe Gen3 x16 = 15.75); network_gbps in Gbit/s per unit (the
unit's share of the instance NIC). heterps_sim/inputs/catalog.py converts to SI on load.

Fill rules (applied in this order; each reads source values only, so no fill feeds another,
except gaudi-fp32-mme, which uses the bf16 value gaudi1-bf16 just filled):

gaudi1-bf16      peak_fp16_or_bf16_tensor_tflops of Gaudi 1 (HL-205): Habana never published
                 it. 150 TFLOPS = ALCF's ">150 TFLOPS (FP16)" per Gaudi-1 accelerator in its AI
                 Testbed table; agrees with Gaudi 2's published 432 bf16 / ~3 (Habana's stated
                 Gaudi 2 vs Gaudi 1 training speed-up) = 144.
gaudi-fp32-mme   blank peak_fp32_tflops of a Gaudi row = bf16 / 8: the Gaudi 3 white paper gives
                 its matrix engine (MME) 229 fp32 vs 1835 bf16 TFLOPS (1:8). Gaudi 2 -> 54,
                 Gaudi 1 -> 18.75. Uncertain: one third-party fp32 Linear benchmark on Gaudi 2
                 reached ~70 TFLOPS, so Gaudi 2's real fp32 peak may be higher.
net-vcpu         blank network_gbps of a row whose host shape is known (vcpus_per_unit given):
                 min(2 x vCPUs, 32) Gbit/s - Google Cloud's default per-VM egress cap (2 Gbit/s
                 per vCPU, at most 32), which the catalog's own GCP rows follow (n1-standard-8:
                 16; n1-highcpu-32: 32). Used for single-GPU rentals (Lambda, RunPod, Azure) that
                 publish no NIC figure.
net-gen          blank network_gbps of a row with no host shape (AMD Instinct, Gaudi 2/3 nodes):
                 the median published (not estimated) per-unit network_gbps of the catalog's GPU
                 rows with the same host_link_gbps (the PCIe generation): Gen4 (31.5) -> 50,
                 Gen5 (63) -> 400.

The instance-named AWS rows (r7i-8xlarge, ...) are written by hand with their sources in
traces/aws_instances.csv (the reference columns plus price_date and price_source) and copied to
heterps_sim/inputs/data/resource_catalog_aws.csv after a check that nothing the cost model needs
is blank. They are not among the 64 reference types (a scenario's `types: all`): a scenario
names them or a glob that matches them.

Spot prices: traces/aws_spot_prices.csv holds, per AWS instance type, the SpotPrice of every
availability zone of the row's region as listed in a pinned SkyPilot AWS catalog (blank where the
source lists none), with its source and the day it was read. Both written catalogs gain three
columns: spot_price_per_hour_usd = the median over the region's AZs that list a spot price, divided
by units_per_instance; spot_price_date; spot_price_source. They stay blank for non-AWS rows and for
AWS rows the side file does not cover. traces/aws_spot_summary.csv (written with the shipped pair)
keeps each instance's min / median / max. No spot number changes a price the cost model reads.

Left blank on purpose (the cost model does not use them): host_link_gbps and
gpu_interconnect_gbps of CPU rows (not applicable: a CPU's data is already in its RAM), tdp_w of
the Graviton4 rows (not published), vcpus_per_unit / host_mem_gb_per_unit / region /
instance_type where no host shape or listing exists.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

from heterps_sim.inputs.catalog import split_entries

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = REPO.parent / "shared" / "data" / "resource_catalog.csv"
DEFAULT_OUT = REPO / "heterps_sim" / "inputs" / "data" / "resource_catalog.csv"
AWS_SOURCE = REPO / "traces" / "aws_instances.csv"
AWS_OUT = REPO / "heterps_sim" / "inputs" / "data" / "resource_catalog_aws.csv"
AWS_EXTRA_COLUMNS = ("price_date", "price_source")
SPOT_SOURCE = REPO / "traces" / "aws_spot_prices.csv"
SPOT_SUMMARY = REPO / "traces" / "aws_spot_summary.csv"
SPOT_COLUMNS = ("spot_price_per_hour_usd", "spot_price_date", "spot_price_source")
SUMMARY_COLUMNS = ("instance_type", "region", "on_demand_usd", "azs_listed", "azs_with_spot",
                   "spot_min_usd", "spot_median_usd", "spot_max_usd", "source", "date")

FP32, FP16, NET = "peak_fp32_tflops", "peak_fp16_or_bf16_tensor_tflops", "network_gbps"
GAUDI1_BF16_TFLOPS = 150.0
GAUDI_MME_FP32_PER_BF16 = 1 / 8  # Gaudi 3 white paper: MME 229 fp32 vs 1835 bf16 TFLOPS
GCP_GBPS_PER_VCPU, GCP_MAX_GBPS = 2.0, 32.0


def entry_column(entry: str) -> str:
    """The column an `estimated_fields` entry names: 'tdp_w(half of ...)' -> 'tdp_w'."""
    return entry.split("(", 1)[0].strip()


def fmt(value: float) -> str:
    """A filled number as the CSV writes it: 4 significant digits, no trailing zeros."""
    return f"{value:.4g}"


def read_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def fill(row: dict[str, str], column: str, value: float, rule: str) -> None:
    """Write a rule's value into a blank cell and mark it in the row's estimated_fields."""
    assert not row[column].strip(), f"{row['name']}: {column} is not blank"
    row[column] = fmt(value)
    entries = split_entries(row["estimated_fields"])
    row["estimated_fields"] = ";".join([*entries, f"{column}(rule:{rule})"])


def is_gaudi(row: dict[str, str]) -> bool:
    return row["name"].startswith("gaudi")


def fill_gaudi_compute(rows: list[dict[str, str]]) -> None:
    """Rules gaudi1-bf16 and gaudi-fp32-mme."""
    for row in rows:
        if is_gaudi(row) and not row[FP16].strip():
            if row["name"] != "gaudi-hl205":
                raise ValueError(f"{row['name']}: no rule for a blank {FP16}")
            fill(row, FP16, GAUDI1_BF16_TFLOPS, "gaudi1-bf16")
        if is_gaudi(row) and not row[FP32].strip():
            fill(row, FP32, float(row[FP16]) * GAUDI_MME_FP32_PER_BF16, "gaudi-fp32-mme")


def published_network_by_link(rows: list[dict[str, str]]) -> dict[str, float]:
    """Median published per-unit network_gbps of GPU rows, keyed by host_link_gbps."""
    groups: dict[str, list[float]] = {}
    for row in rows:
        estimated = {entry_column(e) for e in split_entries(row["estimated_fields"])}
        if row["kind"] == "gpu" and row[NET].strip() and NET not in estimated:
            groups.setdefault(row["host_link_gbps"].strip(), []).append(float(row[NET]))
    return {link: statistics.median(values) for link, values in groups.items()}


def fill_network(rows: list[dict[str, str]]) -> None:
    """Rules net-vcpu and net-gen."""
    by_link = published_network_by_link(rows)
    for row in rows:
        if row[NET].strip():
            continue
        if row["vcpus_per_unit"].strip():
            vcpus = float(row["vcpus_per_unit"])
            fill(row, NET, min(GCP_GBPS_PER_VCPU * vcpus, GCP_MAX_GBPS), "net-vcpu")
        elif row["host_link_gbps"].strip() in by_link:
            fill(row, NET, by_link[row["host_link_gbps"].strip()], "net-gen")
        else:
            raise ValueError(f"{row['name']}: no rule fills a blank {NET}")


def spot_quotes(path: Path = SPOT_SOURCE) -> dict[tuple[str, str], list[dict[str, str]]]:
    """The side file's per-AZ rows, keyed by (instance_type, region), in file order."""
    quotes: dict[tuple[str, str], list[dict[str, str]]] = {}
    for row in read_rows(path)[1]:
        quotes.setdefault((row["instance_type"], row["region"]), []).append(row)
    return quotes


def spot_summary(rows: list[dict[str, str]]) -> dict[str, str]:
    """One instance's AZ statistics (USD per instance-hour); blank spot cells are skipped."""
    prices = [float(r["spot_usd"]) for r in rows if r["spot_usd"].strip()]
    for column in ("on_demand_usd", "source", "date"):
        if len({r[column] for r in rows}) != 1:
            raise ValueError(f"{SPOT_SOURCE}: {rows[0]['instance_type']}: {column} differs by AZ")
    first = rows[0]
    stats = (min(prices), statistics.median(prices), max(prices)) if prices else ("", "", "")
    return {"instance_type": first["instance_type"], "region": first["region"],
            "on_demand_usd": first["on_demand_usd"], "azs_listed": str(len({r["az"] for r in rows})),
            "azs_with_spot": str(len(prices)),
            **dict(zip(SUMMARY_COLUMNS[5:8], (fmt_spot(v) if v != "" else "" for v in stats))),
            "source": first["source"], "date": first["date"]}


def fmt_spot(value: float) -> str:
    """A spot price as the CSVs write it: 6 significant digits (the source quotes 4 decimals)."""
    return f"{value:.6g}"


def add_spot(rows: list[dict[str, str]], quotes: dict[tuple[str, str], list[dict[str, str]]]) -> None:
    """Append SPOT_COLUMNS to every row: the per-unit median spot price of the row's AWS instance
    in its region, with date and source; blank where the row is not AWS or has no quote."""
    for row in rows:
        key = (row["instance_type"].strip(), row["region"].strip())
        summary = spot_summary(quotes[key]) if row["cloud"].strip() == "AWS" and key in quotes else None
        if summary is None or not summary["spot_median_usd"]:
            row.update(dict.fromkeys(SPOT_COLUMNS, ""))
            continue
        units = float(row["units_per_instance"])
        row.update(zip(SPOT_COLUMNS, (fmt_spot(float(summary["spot_median_usd"]) / units),
                                      summary["date"], summary["source"])))


def write_rows(out: Path, columns: list[str], rows: list[dict[str, str]]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def build(source: Path, out: Path) -> list[dict[str, str]]:
    """Read `source`, fill blanks by rule, add the spot columns, write `out`; returns the rows."""
    columns, rows = read_rows(source)
    fill_gaudi_compute(rows)
    fill_network(rows)
    add_spot(rows, spot_quotes())
    write_rows(out, [*columns, *SPOT_COLUMNS], rows)
    return rows


def build_aws(source: Path, out: Path, reference_columns: list[str]) -> list[dict[str, str]]:
    """Copy the instance-named AWS rows (traces/aws_instances.csv: every cell sourced or
    marked, no blank the cost model needs) after checking they have the reference catalog's
    columns plus price_date and price_source, each filled; the spot columns are appended."""
    columns, rows = read_rows(source)
    want = [*reference_columns, *AWS_EXTRA_COLUMNS]
    if columns != want:
        raise ValueError(f"{source}: columns must be the reference catalog's plus "
                         f"{', '.join(AWS_EXTRA_COLUMNS)}")
    for row in rows:
        for column in (NET, FP32, FP16, "price_per_hour_usd", *AWS_EXTRA_COLUMNS):
            if not row[column].strip():
                raise ValueError(f"{source}: {row['name']}: {column} is blank")
    add_spot(rows, spot_quotes())
    write_rows(out, [*columns, *SPOT_COLUMNS], rows)
    return rows


def build_spot_summary(out: Path = SPOT_SUMMARY) -> list[dict[str, str]]:
    """Write each side-file instance's min / median / max spot price (USD per instance-hour)."""
    rows = [spot_summary(quotes) for quotes in spot_quotes().values()]
    write_rows(out, list(SUMMARY_COLUMNS), rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Fill the sourced resource catalog's blanks by documented rules.",
        epilog="example: .venv/bin/python traces/build_catalog.py --out /tmp/catalog.csv")
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE,
                        help=f"sourced catalog CSV (default: {DEFAULT_SOURCE})")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"where to write the filled catalog (default: {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    if not args.source.is_file():
        print(f"error: source catalog {args.source} not found", file=sys.stderr)
        return 2
    rows = build(args.source, args.out)
    filled = sum("(rule:" in r["estimated_fields"] for r in rows)
    print(f"wrote {len(rows)} resource types to {args.out} ({filled} rows with filled cells)")
    if args.out == DEFAULT_OUT:  # the shipped pair; a --out trial leaves the AWS rows alone
        aws = build_aws(AWS_SOURCE, AWS_OUT, read_rows(args.source)[0])
        print(f"wrote {len(aws)} instance-named AWS types to {AWS_OUT}")
        print(f"wrote {len(build_spot_summary())} spot summaries to {SPOT_SUMMARY}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
