"""heterps_sim.tiers: the parameter server's tier logic, without data and without torch.

One shard of `heterps_exec.ps` keeps each table's rows in tiers (hot, warm, cold) whose
residency these modules decide; the live server and the simulator run the very same code, so
a hit rate the simulator predicts from an id stream is the hit rate the server counts on it.

    tiers/kernels.py   numba kernels: LRU list, LFU heap, row moves (one batch of keys per call)
    tiers/policies.py  lru | lfu (TinyLFU-like admission) | paddle (demote rows unseen n passes)
    tiers/tiers.py     TieredRows: hot + warm RAM tiers over a cold store, per-tier counters;
                 NullStore (a cold tier that keeps nothing)
    tiers/replay.py    replay_hit_rates (a stream through TieredRows, no data), belady_hit_rate,
                 zipf_ids, ps_options (the simulator's PsOptions from a replay)

`heterps_exec.ps` imports these (it may import heterps_sim, never the reverse). This package
imports numpy and numba only; importing it bare (POLICIES) imports nothing.
"""

POLICIES = ("lru", "lfu", "paddle")
"""Hot-tier policies (`tiers/policies.py`)."""
