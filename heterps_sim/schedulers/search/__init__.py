"""The plan search space and the local search (polish, level and window moves) schedulers share."""
