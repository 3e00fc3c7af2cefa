"""The exact scheduler: a sweep over bottleneck levels, its DP kernels, shared caps, mixed stages."""
