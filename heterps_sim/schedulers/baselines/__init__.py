"""The baseline schedulers: single type, PaddlePaddle's placement, random search, greedy,
genetic, Bayesian optimisation."""
