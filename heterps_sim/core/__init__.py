"""The contract both packages share: spec, problem, plan, result, pipeline order, lanes,
sharing, H-PS options, traces and the one bad-input error. numpy + pydantic only, never simpy or torch.
Also what both command lines share: outputs (atomic writes), limits (input bounds), progress
(status lines and bars on stderr, only on a terminal) and numba_cache (where the compiled
kernels are cached; numba imported only when a kernel module calls it)."""
