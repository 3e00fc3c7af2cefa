"""What a stage holding embedding rows pays the parameter server in a flushed step
(cost/flush.py's "PS shards"): one home for the arithmetic the closed form, the exact
search's labels and its bounds all use (ps_stage_numba.py compiles the same source for the
kernels). Builtins only, so the compiled copy resolves nothing else."""


def stage_terms(pull: float, k: int, m: int, n: int, spare: float, w: float, beta: float,
                holds: bool, last: bool) -> tuple[float, float]:
    """(forward pace, pushes' drain) of a stage on k units with rows: `pull` one microbatch's
    pull, n its busiest unit's microbatches, spare = busy - w (its extra microbatches' work),
    w one microbatch's work; `holds`: the odt holds the PS's unloaded time; `last`: the plan's
    last stage.

    Every unit pulls its first microbatch at the step's start, so the units start
    (min(k, m) - 1) pulls apart (one more, and a pull between a unit's forwards, when the odt
    leaves the service out). The m pushes drain back to back from the stage's first
    backward's end (its start when the odt holds the service), which its own backward pace,
    and at the last stage its units' stagger, put before its last backward's end."""
    stagger = (min(k, m) - 1.0 + (0.0 if holds else 1.0)) * pull
    between = 0.0 if holds else (n - 1) * pull
    pace = (1.0 - beta) * spare + stagger + between
    drain = (max(pull, m * pull - beta * spare - (stagger if last else 0.0))
             - (beta * w if holds else 0.0))
    return pace, drain
