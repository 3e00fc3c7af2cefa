"""H-PS options in the engine: speed-aware splits, overlapped all-reduce, boundary quantization."""
