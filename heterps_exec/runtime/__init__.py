"""Inside a run: what every rank reads, what one rank does, and what it measured.

    layout.py     RunSpec (what every rank reads, written by launch/prepare.py), rank
                  numbering, microbatch routing
    worker.py     one rank (`python -m heterps_exec.runtime.worker SPEC.json`, started by
                  torchrun): process groups, its stage, steps, checkpoints, results to rank 0
    stage.py      one replica's step: forwards, backwards, messages, all-reduce, update
    timeline.py   measured spans of one rank, per category
    measure.py    rank measurements -> RunResult(source="exec"), trace spans
    reference.py  single-process training on the same batches: the correctness oracle
    reference_norms.py  the oracle's BatchNorm under model.batchnorm broadcast and sync
"""
