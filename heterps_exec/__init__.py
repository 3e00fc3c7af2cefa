"""heterps_exec: run a heterps plan for real with torch.distributed, and measure it.

Where things live (a folder per role; only this package imports torch for training):
    cli/           `heterps-exec`: run, profile, validate, ps_bench (one module per command)
    model/         build (zoo graph -> torch modules named by layer), ops (one class per graph
                   op), partition (stage modules by layer names; what crosses a cut)
    hps/           H-PS options in the engine: speed (--share speed), overlap (bucketed
                   all-reduce), quantize (boundary encodings), auto_quantize (--quantize auto)
    calibration/   profiler (measured layers), links (gloo timed in situ), calibrate (a problem
                   from those), validate (predictions vs measured runs), figure
    ps/            the tiered parameter server's ranks (own TCP streams to their clients);
                   ps_bridge.py its tables in a run
    rows.py        deterministic initial embedding rows (shared with the parameter server)
    data/          the training data: a scenario's `data:` section (synthetic, Criteo text,
                   Parquet, a factory) as one stream of global batches; held-out scores
    layout.py      RunSpec (what every rank reads), rank numbering, microbatch routing
    binding.py     resource type -> device, or an emulated slowdown
    request.py     RunRequest: the run's options, checked as they are built (H-PS fields
                   from heterps_sim.core.hps); ExecError, the one-line bad input
    launch.py      loads and binds, writes the run folder, starts torchrun (with restarts)
    capacity.py    will the ranks fit this machine (memory, GPU memory, cores)? before launch
    api.py         run_plan: `heterps-exec run` from Python (the same checks and result)
    worker.py      one rank: process groups, stage, steps, checkpoints, results to rank 0
    runtime.py     one replica's step: forwards, backwards, messages, all-reduce, update
    checkpoint.py  DCP checkpoints + an atomic `latest` pointer
    measure.py     rank measurements -> RunResult(source="exec"), trace spans
    timeline.py    measured spans of one rank, per category
    reference.py   single-process training on the same batches: the correctness oracle

Glossary: a *stage* is a contiguous run of layers on one resource type; a *replica* is one
rank running a stage; microbatch mu of step n is numbered n * m + i; a *boundary* is the cut
between two stages.
"""

from heterps_exec.api import run_plan  # noqa: E402  (import-light: no torch until called)

__all__ = ["run_plan"]
