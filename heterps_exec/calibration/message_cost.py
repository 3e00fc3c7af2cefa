"""What one boundary message costs this host's CPU as the engine sends it.

The links JSON's `message_cpu` (calibration/gloo_cpu.py) times gloo's isend / irecv alone:
70-100 us per message and side on the 2-core VMs measured. A pipeline rank pays more
per message: the Python around each send and receive (the receive's buffer, the gradient's
message, the schedule's bookkeeping, and under async the weight versions), most of it on
the rank's own thread, so in series with its layers. Measured on exec-tiny (m = 8, two ranks
on two cores), each rank's CPU outside its compute spans was 2.6-3.4 ms per step where
gloo's figure and the one-rank runtime overhead account for about 1.9. (Packing and
unpacking the forward message are not part of it: the cost model folds the profiled encode
and decode into the layers at the cut, and the engine times them as compute.)

So `validate --message-cpu calibrate` measures it where it predicts: two-rank pipeline runs
(the model cut in half, one rank per stage, no emulation) under each schedule its plans use,
beside the one-rank runs that give the runtime's own overhead. Per message and side:

    cpu = (sum over the two ranks of (CPU per step - compute CPU per step)
           - 2 x the one-rank run's (CPU per step - compute CPU per step)) / (4 m)
          - the per-byte part the links JSON charges for those messages

(each rank sends m and receives m messages per step; the one-rank run at the same m holds
the runtime's per-step and per-microbatch work that the simulator already folds into every
stage's layers, calibration/calibrate.py). The simulator then charges it like gloo's figure
(des/work.py, `cores`): on the sending and the receiving operation, and on the host's cores.

One figure for every cut is the approximation: on exec-tiny a rank pays 20-230 us per message
by its place in the plan, and the half-way cut, inside the embedding block, is among the
dearer (150-197 us), so diverse plans are charged too much (results page "Asynchronous
pipelines", "A message's CPU as the engine pays it"); hence an option, not the default.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path

from heterps_sim.core.plan import Plan, Stage

MICROBATCHES = 8
"""The pipeline calibration's microbatch count: the one-rank calibration's larger one, so
that the runtime overhead subtracted is measured at the same m."""


def saved_in(folder: str | Path) -> bool:
    """Whether a validate output folder holds these calibration runs (validate names each
    run `run` + its name; calibrate's are `calibration-<schedule>-pipeline-<repeat>`), so a
    rescore of it can calibrate again from them."""
    return any(Path(folder).glob("runcalibration-*-pipeline-*"))


def pipeline_plan(layers: list[str], resource: str, schedule: str) -> Plan:
    """Two stages (the layers cut in half), one unit of `resource` each."""
    half = max(1, len(layers) // 2)
    return Plan(stages=(Stage(layers=tuple(layers[:half]), resource=resource, num_replicas=1),
                        Stage(layers=tuple(layers[half:]), resource=resource,
                              num_replicas=1)),
                num_microbatches=MICROBATCHES, schedule=schedule)


def outside_compute_cpu(stage: dict) -> float:
    """A stage's CPU per step outside its compute and optimizer spans (measure.exec_result's
    per-stage extra: every thread of the rank, gloo's included)."""
    return max(stage["cpu_s"] - stage["compute_cpu_s"], 0.0)


def per_message_cpu(one_rank_s: float, pipeline_s: list[float], m: int, links_cpu: dict | None,
                    boundary_bytes: float) -> dict:
    """MessageCpu's fields from the calibration's figures (module docstring): one_rank_s,
    pipeline_s: CPU per step outside compute of the one-rank run and of each pipeline rank;
    boundary_bytes: what crosses the cut per step, both ways. Both sides get the same
    per-message figure (the runs see their sum only); the per-byte terms stay the links
    JSON's (0 without one); clipped at 0 (a noisy calibration must not credit CPU)."""
    if len(pipeline_s) != 2 or m < 1:
        raise ValueError("per_message_cpu: two pipeline ranks and m >= 1 expected")
    links_cpu = links_cpu or {}
    send_b = float(links_cpu.get("send_s_per_byte", 0.0))
    recv_b = float(links_cpu.get("recv_s_per_byte", 0.0))
    # both ranks together send and receive every byte once: (send + recv) x bytes per step
    bytes_part = (send_b + recv_b) * boundary_bytes / (4 * m)
    each = (sum(pipeline_s) - 2 * one_rank_s) / (4 * m) - bytes_part
    each = max(each, 0.0)
    return {"send_s": each, "recv_s": each, "send_s_per_byte": send_b,
            "recv_s_per_byte": recv_b}


def calibrate(plans: list[Plan], problem, links_cpu: dict | None,
              run_plan: Callable[[Plan, str], list], one_rank_runs: Callable[[int], list]
              ) -> dict[str, dict]:
    """MessageCpu's fields per schedule of the multi-stage `plans` ({} when none, or a
    one-layer model): `run_plan(plan, name)` runs a calibration plan (validate's repeats) and
    returns its results, `one_rank_runs(m)` the one-rank calibration's at m (shared with the
    runtime overhead's). Medians over the runs, per rank."""
    layers = list(problem.layer_names)
    schedules = sorted({p.schedule for p in plans if len(p.stages) > 1})
    if not schedules or len(layers) < 2:
        return {}
    alone = statistics.median(outside_compute_cpu(x.extra["stages"][0])
                              for x in one_rank_runs(MICROBATCHES))
    out = {}
    for schedule in schedules:
        pipe = pipeline_plan(layers, problem.type_names[0], schedule)
        got = run_plan(pipe, f"{schedule}-pipeline")
        ranks = [statistics.median(outside_compute_cpu(x.extra["stages"][g]) for x in got)
                 for g in range(2)]
        cut = layers.index(pipe.stages[0].layers[-1])
        out[schedule] = per_message_cpu(alone, ranks, MICROBATCHES, links_cpu,
                                        float(problem.boundary_bytes[cut]))
    return out
