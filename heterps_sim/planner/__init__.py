"""The one path from a problem to the printed answer: search -> pricing -> the simulator's
check -> repair (planner/planner.py). Every command, study and caller plans and prices here.

    from heterps_sim.planner import Planner, Pricing
    answer = Planner(search="exact").plan(problem, check=True)
    answer.plan, answer.result, answer.proven, answer.gap, answer.check
"""

from heterps_sim.planner.answer import Answer
from heterps_sim.planner.planner import Planner
from heterps_sim.planner.pricing import Pricing

__all__ = ["Answer", "Planner", "Pricing"]
