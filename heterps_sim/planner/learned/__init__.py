"""A learned scheduler for noisy, reclaimable rentals, trained in the simulator: an LSTM policy
that decides which types to rent on spot, the headroom the exact solver plans at, units added
per stage and the checkpoint interval, rewarded by simulated jobs (planner/episodes.py)."""
