"""The Markdown report and the headline numbers it shares with benchmarks/bench_headline.py."""

from __future__ import annotations

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
    assert "| exec-tiny | 20,000 |" in text  # a headline row
    # where our plan comes from: under the default model (each scenario's own) exec-tiny's
    # 14 layers run on one CPU unit (under the paper model, on one T4)
    assert "| 0 | input .. loss (14) | xeon-icelake-16vcpu x1 |" in text
    assert "No feasible plan at this limit" in text  # dlrm-impossible at its own limit
    for name in ("exec-tiny", "dlrm-impossible"):  # ... still has a trade-off curve below it
        assert f"![cost vs throughput]({name}/figures/tradeoff.png)" in text
        for fig in ("tradeoff", "composition", "ratios"):
            assert (out / name / "figures" / f"{fig}.png").stat().st_size > 10_000
