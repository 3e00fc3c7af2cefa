"""Random numeric problems for oracle tests (brute force, reference vs batch evaluators).

The generator is the one the `rl` scheduler pre-trains on, so tests and training draw from
one family: random_problem(rng, layers, types, caps=, unrunnable=, odt_parallel=,
limit_quantile=). Importing it loads no torch.
"""

from heterps_sim.schedulers.rl.stagewise.imitation import random_problem

__all__ = ["random_problem"]
