"""heterps_exec: run a heterps plan for real with torch.distributed, and measure it.

Where things live (one responsibility per module; only this package imports torch for training):
    cli.py         `heterps-exec` dispatcher: run (cli_run.py), profile (cli_profile.py),
                   validate (cli_validate.py), ps-bench (ps/cli.py)
    models.py      zoo graph -> torch modules named by layer (ops.py: one class per graph op)
    rows.py        deterministic initial embedding rows (shared with the parameter server)
    partition.py   stage modules by layer names; Boundary = what crosses a cut, its wire format
    quantize.py    fp16 / bf16 / int8 encodings of boundary tensors, and the `auto` rule
    auto_quantize.py  --quantize auto: per link and step, the encodings both ends agree on
    data.py        synthetic Criteo-like data on disk + a prefetching loader of global batches
    layout.py      RunSpec (what every rank reads), rank numbering, microbatch routing
    binding.py     resource type -> device, or an emulated slowdown
    launch.py      checks inputs, writes the run folder, starts torchrun (with restarts)
    worker.py      one rank: process groups, stage, steps, checkpoints, results to rank 0
    runtime.py     one replica's step: forwards, backwards, messages, all-reduce, update
    overlap.py     bucketed all-reduce during the last backward (--overlap on)
    sharing.py     speed-aware split of microbatches (--share speed; rules in heterps_sim)
    checkpoint.py  DCP checkpoints + an atomic `latest` pointer
    ps/, ps_bridge.py  the tiered parameter server, and its ranks/tables in a run
    measure.py     rank measurements -> RunResult(source="exec"), trace spans
    reference.py   single-process training on the same batches: the correctness oracle
    profiler.py, profile_links.py   measured layers; gloo messages and all-reduces timed in situ
    calibrate.py, validate.py   a problem calibrated from those -> predictions vs measured runs

Glossary: a *stage* is a contiguous run of layers on one resource type; a *replica* is one
rank running a stage; microbatch mu of step n is numbered n * m + i; a *boundary* is the cut
between two stages.
"""
