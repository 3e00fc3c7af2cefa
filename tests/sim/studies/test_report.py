"""The Markdown report and the headline numbers it shares with benchmarks/bench_headline.py."""

from __future__ import annotations

import json

import pytest

from heterps_sim.cli import main
from heterps_sim.inputs.load import load_input
from heterps_sim.studies.headline import headline, pct_less, single_type_throughput_at


def test_pct_less_is_the_papers_convention():
    assert pct_less(4.123) == pytest.approx(312.3)  # HeterPS: "312.3% lower cost"
    assert pct_less(1.0) == 0.0


def test_a_single_type_optimum_is_its_own_baseline():
    """Under the paper model, ctr-dnn-64types' optimum is one type: cost ratio 1, and the same
    money per hour buys exactly its units again (5 x 1.85 USD/h buys 5 units, not 4: float
    floor division). (Under the default model no plan meets these limits.)"""
    problem = load_input("scenarios/ctr-dnn-64types.yaml", "paper").problem
    for limit in (6e7, 4.86e7, 1.2e8):
        row = headline(problem.with_limit(limit))
        assert row["cost_ratio"] == pytest.approx(1.0)
        assert row["throughput_ratio"] == pytest.approx(1.0)
    thr, bought = single_type_throughput_at(problem, 5 * 1.85)
    assert bought == "mi300x x5"


def test_headline_on_dlrm_matches_the_results_page():
    """docs/results/headline-and-tradeoff.md: the paper model at the paper-era 30 M samples/s
    (the scenario's own limit changed with the default model, scenarios/dlrm-64types.yaml)."""
    row = headline(load_input("scenarios/dlrm-64types.yaml", "paper").problem.with_limit(3e7))
    assert row["cost_ratio"] == pytest.approx(25.67, abs=0.01)
    assert row["same_money_single_type"] == "mi325x x50"


def test_report_for_two_scenarios(tmp_path, capsys):
    out = tmp_path / "report"
    code = main(["report", "--out", str(out), "--scenarios", "exec-tiny,dlrm-impossible",
                 "--points", "3"])
    assert code == 0 and str(out / "report.md") in capsys.readouterr().out
    text = (out / "report.md").read_text()
    assert "| exec-tiny | default | 20,000 | 0.034 |" in text  # a headline row, its model
    # where our plan comes from: under the default model (each scenario's own) exec-tiny's
    # 14 layers run on one CPU unit (under the paper model, on one T4)
    assert "| 0 | input .. loss (14) | xeon-icelake-16vcpu x1 |" in text
    assert "No feasible plan at this limit" in text  # dlrm-impossible at its own limit
    for name in ("exec-tiny", "dlrm-impossible"):  # ... still has a trade-off curve below it
        assert f"![cost vs throughput]({name}/figures/tradeoff.png)" in text
        for fig in ("tradeoff", "composition", "ratios"):
            assert (out / name / "figures" / f"{fig}.png").stat().st_size > 10_000
        assert json.loads((out / name / "sweep.json").read_text())["model"] == "default"
    # exec-tiny's one-unit plan meets its limit in the simulator as scheduled, both plans
    assert "| ours | scheduled | 1 | 124,983 | 124,983 | +524.9% | 0.034 | 0.034 |" in text
    assert "| 0.034 | 0.034 | 1.00x |" in text  # the simulator's columns of the headline


def test_report_under_the_paper_model(tmp_path):
    """--model paper: every number is the paper model's (exec-tiny's whole job priced at
    0.00013 USD on one T4, docs/results/2026-11-24-regenerated.md), and the report says so."""
    out = tmp_path / "report"
    assert main(["report", "--out", str(out), "--scenarios", "exec-tiny", "--points", "2",
                 "--model", "paper", "--quiet"]) == 0
    text = (out / "report.md").read_text()
    assert "| exec-tiny | paper | 20,000 | 0.00013 |" in text
    assert "paper cost model" in text and "default cost model" not in text
    assert "| 0 | input .. loss (14) | t4 x1 |" in text
    assert json.loads((out / "exec-tiny" / "sweep.json").read_text())["model"] == "paper"


def test_the_simulator_check_is_what_simulate_finds(tmp_path, capsys):
    """nce-cpu-gpu under the default model: our plan misses the limit in the simulator and
    `simulate` re-provisions it; the best single-type plan meets it as scheduled. The report's
    check gives the same plans and costs as `heterps-sim simulate --json` and ratios them."""
    from heterps_sim.studies.report import _outcomes
    from heterps_sim.studies.report_check import (
        check_plans,
        check_table,
        confirmed_usd,
        headline_cells,
        simulated_ratio,
        verdict,
    )
    assert main(["simulate", "scenarios/nce-cpu-gpu.yaml", "--json", "--quiet",
                 "--out", str(tmp_path / "run")]) == 0
    sim = json.loads(capsys.readouterr().out)["verify"]
    problem = load_input("scenarios/nce-cpu-gpu.yaml").problem
    outcomes = _outcomes(problem)
    checks = check_plans(problem, outcomes)
    ours, single = checks["exact"], checks["homogeneous"]
    assert ours.status == sim["status"] and ours.status in ("replanned", "reprovisioned")
    assert [s.num_replicas for s in ours.final_plan.stages] == sim["final"]["simulated"]["units"]
    assert confirmed_usd(ours) == pytest.approx(sim["final"]["simulated"]["cost_usd"])
    assert ours.simulated.throughput == pytest.approx(sim["simulated"]["throughput"])
    assert single.status == "confirmed"
    assert confirmed_usd(single) == pytest.approx(outcomes["homogeneous"].result.cost_usd)
    x = simulated_ratio(checks)
    assert x == pytest.approx(confirmed_usd(single) / confirmed_usd(ours))
    cells = headline_cells(checks)
    assert cells["sim_x"] == f"{x:.2f}x" and cells["sim_single"] == f"{confirmed_usd(single):,.4g}"
    limit = problem.throughput_limit
    table = check_table(checks, limit)
    assert table.count("| ours |") == 2 and table.count("| best single type |") == 1
    assert "by `simulate`" in table
    said = verdict(checks, limit)
    assert f"meets the limit as scheduled ({confirmed_usd(single):,.4g} USD)" in said
    assert f"the single type pays {x:.2f}x ours in the simulator" in said


def test_a_plan_the_simulator_refutes_says_so():
    """dlrm-64types: no single-type plan at the limit, and ours misses it in the simulator
    even after `simulate`'s re-provisioning: no simulated ratio, the shortfall stated."""
    from heterps_sim.studies.report import _outcomes
    from heterps_sim.studies.report_check import check_plans, headline_cells, verdict
    problem = load_input("scenarios/dlrm-64types.yaml").problem
    checks = check_plans(problem, _outcomes(problem))
    assert set(checks) == {"exact"} and not checks["exact"].meets_limit
    gap = 100 * (checks["exact"].final_simulated.throughput / problem.throughput_limit - 1)
    assert gap < 0
    cells = headline_cells(checks)
    assert cells == {"sim_ours": f"misses ({gap:+.1f}%)", "sim_single": "none", "sim_x": "n/a"}
    said = verdict(checks, problem.throughput_limit)
    assert f"ours: misses the limit ({gap:+.1f}% at best)" in said and "pays" not in said
