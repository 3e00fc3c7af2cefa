"""heterps-sim compare: every scheduler's gap to the exact optimum, as a table and a CSV."""

import json
import math

import pandas as pd

from heterps_sim.cli import main
from heterps_sim.inputs.load import load_input
from heterps_sim.studies.compare import compare


def test_gaps_are_relative_to_the_exact_optimum():
    problem = load_input("heterps_sim/inputs/data/default.yaml").problem
    frame = compare(problem, ["exact", "homogeneous", "cpu-only"], progress=False)
    rows = frame.set_index("scheduler")
    assert rows.loc["exact", "gap_pct"] == 0.0
    homogeneous = rows.loc["homogeneous"]
    assert homogeneous["gap_pct"] == 100 * (homogeneous["cost_usd"] / rows.loc["exact", "cost_usd"] - 1)
    # the exact answer searches a superset of the one-stage one-type plans, under one pricing
    assert homogeneous["gap_pct"] >= 0 if rows.loc["exact", "proven"] else True
    assert not homogeneous["proven"]  # a heuristic never claims a proof
    cpu = rows.loc["cpu-only"]
    assert cpu["feasible"] or (math.isinf(cpu["cost_usd"]) and cpu["reason"])


def test_cli_writes_csv_and_json(tmp_path, capsys):
    out = tmp_path / "c.csv"
    code = main(["compare", "scenarios/exec-tiny.yaml", "--schedulers", "exact,homogeneous",
                 "--out", str(out), "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0 and [r["scheduler"] for r in rows] == ["exact", "homogeneous"]
    table = pd.read_csv(out)
    assert list(table["scheduler"]) == ["exact", "homogeneous"] and table["gap_pct"].min() == 0.0


def test_unknown_scheduler_is_bad_input(capsys):
    code = main(["compare", "scenarios/exec-tiny.yaml", "--schedulers", "exact,astrology"])
    err = capsys.readouterr().err
    assert code == 2 and "astrology" in err and len(err.strip().splitlines()) == 1


def test_gaps_are_undefined_when_no_plan_is_feasible():
    from dataclasses import replace
    problem = load_input("scenarios/exec-tiny.yaml").problem
    impossible = replace(problem, throughput_limit=1e15)
    frame = compare(impossible, ["exact", "homogeneous"], progress=False)
    assert not frame["feasible"].any() and frame["gap_pct"].isna().all()
    assert (frame["cost_usd"] == math.inf).all()
