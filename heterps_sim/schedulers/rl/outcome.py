"""How a training run ends, for both RL trainers: exit 0 when the policy sampled a feasible plan
on every training problem it sampled on, else 1 (the exit of a plan that misses the throughput
limit) with one line on stderr naming the problems, so a script does not mistake a policy that
never found a feasible plan for a trained one. A run that samples nothing (imitation alone)
exits 0. The checkpoint is written either way."""

from __future__ import annotations

import sys

EXIT_NO_FEASIBLE_PLAN = 1


def no_feasible_plan_exit(tasks) -> int:
    """0, or 1 after saying which tasks (each with .problem, .best_plan and .evaluations:
    plans sampled) were sampled on but never gave a feasible plan."""
    missed = [t.problem.name or "?" for t in tasks
              if t.best_plan is None and getattr(t, "evaluations", 1) > 0]
    if not missed:
        return 0
    shown = ", ".join(missed[:5]) + (f" and {len(missed) - 5} more" if len(missed) > 5 else "")
    print(f"heterps-sim train-rl: no feasible plan was sampled on {shown} (the checkpoint is "
          "written, but its policy found nothing that meets the limit: train longer, or check "
          "that the problem has a feasible plan with `heterps-sim schedule`)", file=sys.stderr)
    return EXIT_NO_FEASIBLE_PLAN
