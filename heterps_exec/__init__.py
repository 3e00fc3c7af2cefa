"""heterps_exec: run a heterps plan for real with torch.distributed, and measure it.

    from heterps_exec import RunRequest, run_plan
    result = run_plan(RunRequest(plan="plan.json", scenario="scenario.yaml", steps=20))

Where things live (a folder per role; only this package imports torch for training):
    api.py         run_plan(RunRequest): the library; `heterps-exec run` calls it
    request.py     RunRequest: the one options object (the run's flags are generated from
                   it), checked as it is built; ExecError, the one-line bad input
    cli/           `heterps-exec`: run, profile, validate, ps_bench (parse, build the
                   request, print)
    launch/        prepare (plan + scenario + binding -> a checked RunSpec), binding, capacity
                   (will the ranks fit?), torchrun (start, restarts, timeout), proctree (every
                   process stops with the launcher), dir_lock, bind_addr
    runtime/       what every rank reads and does: layout (RunSpec, rank numbering, microbatch
                   routing), worker (one rank), stage (one replica's step), timeline, measure
                   (rank measurements -> RunResult), reference (the single-process oracle)
    checkpoint/    dcp (DCP checkpoints + an atomic `latest` pointer), trust (data, never code)
    model/         build (zoo graph -> torch modules named by layer), ops, partition (stage
                   modules by layer names), user_model / user_stage (a user's module), rows
                   (deterministic initial embedding rows, shared with the parameter server)
    data/          the training data: a scenario's `data:` section (synthetic, Criteo text,
                   Parquet, a factory) as one stream of global batches; held-out scores
    hps/           H-PS options in the engine: speed (--share speed), overlap (bucketed
                   all-reduce), quantize (boundary encodings), auto_quantize (--quantize auto)
    calibration/   profiler (measured layers), links (gloo timed in situ), calibrate (a problem
                   from those), validate (predictions vs measured runs), prediction (what heterps
                   predicted beside what a run measured), figure
    ps/            the tiered parameter server's ranks (own TCP streams to their clients);
                   bridge.py its tables in a run

Glossary: a *stage* is a contiguous run of layers on one resource type; a *replica* is one
rank running a stage; microbatch mu of step n is numbered n * m + i; a *boundary* is the cut
between two stages.
"""

from heterps_exec.api import RunFailed, run_plan  # import-light: no torch until called
from heterps_exec.request import ExecError, RunRequest

__all__ = ["ExecError", "RunFailed", "RunRequest", "run_plan"]
