"""The analytic cost model: the Amdahl provisioning formula, per-stage terms, the reference
model and its batched (numba) form."""
