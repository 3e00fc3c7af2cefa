"""Studies over many plans: comparisons, throughput-limit sweeps, headline ratios, reports."""
