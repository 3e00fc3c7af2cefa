"""The printed cost adds up on screen: USD/h x the hours billed, and the billed hours are the
slowest start plus the run, rounded up to whole billing granules (as cost.reference.job_cost
bills them)."""

from __future__ import annotations

import math
import re

import pytest

from heterps_sim.inputs.load import load_input
from heterps_sim.planner import Planner
from heterps_sim.plots.tables import result_summary

NUMBER = r"([\d,.]+(?:e[+-]?\d+)?)"


def _num(text: str) -> float:
    return float(text.replace(",", ""))


@pytest.mark.parametrize("scenario", ["exec-tiny", "nce-cpu-gpu", "2emb-aws"])
def test_the_cost_line_adds_up(scenario):
    problem = load_input(f"scenarios/{scenario}.yaml").problem
    result = Planner().plan(problem).result
    line = next(x for x in result_summary(result).splitlines() if x.startswith("cost"))
    assert result.feasible
    m = re.fullmatch(rf"cost\s+{NUMBER} USD = {NUMBER} USD/h x {NUMBER} h billed \(startup "
                     rf"{NUMBER} s \+ run {NUMBER} s, rounded up to {NUMBER} s granules\)", line)
    assert m, line
    usd, rate, billed, startup, run, granule = (_num(g) for g in m.groups())
    # the rate includes the parameter-server hosts the plan pays for
    ps = (result.extra.get("ps_hosts") or {}).get("price_per_hour", 0.0)
    assert rate == pytest.approx(result.cost_per_hour + ps, rel=1e-5)
    # what is shown multiplies out (6 significant digits on screen)
    assert usd == pytest.approx(rate * billed, rel=1e-4)
    assert billed == pytest.approx(math.ceil((startup + run) / granule) * granule / 3600.0,
                                   rel=1e-4)
    # and is the bill the planner priced, its startup the problem's slowest unit start
    assert startup == pytest.approx(max(problem.unit_costs.startup_s[problem.type_names.index(t)]
                                        for t in result.units_per_type), rel=1e-6)
    assert run == pytest.approx(problem.num_samples / result.throughput, rel=1e-4)
    assert usd == pytest.approx(result.cost_usd, rel=1e-5)
