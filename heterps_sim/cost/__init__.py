"""The analytic cost model, its face: `evaluate_plan(problem, plan, mode)` -> RunResult.

Inside: amdahl (the provisioning formula, written once), terms (a stage's OCT, ODT, alpha,
P and S, mixed stages finishing together), reference (the model: provisioning in mode
least or exact, the run result), batch (the same model over many type assignments at once,
numba; import it directly, it loads numba), dominant (the default model's stage time,
provisioning and billing), ps_traffic (the parameter server's traffic and capacity), flush (a
plan's step time under a flushed schedule, in closed form). The formulas are in
docs/design.md.
"""

from heterps_sim.cost.reference import (  # noqa: F401  (the face: the model's public names)
    MAX_REPLICAS,
    MODES,
    PlanError,
    evaluate_plan,
    stage_terms,
)
