"""The analytic cost model, its face: `evaluate_plan(problem, plan, mode)` -> RunResult.

Inside: amdahl (the provisioning formula, written once), terms (a stage's OCT, ODT, alpha,
P and S, mixed stages finishing together), reference (the model: provisioning in mode
least or exact, the run result), batch (the same model over many type assignments at once,
numba; import it directly, it loads numba). The formulas are in docs/design.md.
"""

from heterps_sim.cost.reference import (  # noqa: F401  (the face: the model's public names)
    MAX_REPLICAS,
    MODES,
    PlanError,
    evaluate_plan,
    stage_terms,
)
