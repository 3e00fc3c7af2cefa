"""What one boundary message costs this host's CPU as the engine sends it.

The links JSON's `message_cpu` (calibration/gloo_cpu.py) times gloo's isend / irecv alone:
70-100 us per message and side on the 2-core VMs measured. A pipeline rank pays more
per message: gloo's TCP thread as the schedule's timing drives it, and the Python around each
send and receive (the receive's buffer, the gradient's message, the schedule's bookkeeping,
and under async the weight versions). Measured on exec-tiny (m = 8, two ranks
on two cores), each rank's CPU outside its compute spans was 2.6-3.4 ms per step where
gloo's figure and the one-rank runtime overhead account for about 1.9. (Packing and
unpacking the forward message are not part of it: the cost model folds the profiled encode
and decode into the layers at the cut, and the engine times them as compute.)

So `validate --message-cpu calibrate` measures it where it predicts: two-rank pipeline runs
(one rank per stage, no emulation), under each schedule the plans use, cut at each boundary
the plans cut, beside the one-rank runs that give the runtime's own overhead. Per cut,
message and side:

    cpu = (the rank's CPU per step - its compute CPU per step
           - the one-rank run's (CPU per step - compute CPU per step)) / (2 m)
          - the per-byte part the links JSON charges for those messages

for the upstream rank (its forward sends and gradient receives) and the downstream one (its
forward receives and gradient sends) apart (each rank sends m and receives m messages per
step; the one-rank run at the same m holds the runtime's per-step and per-microbatch work
that the simulator already folds into every stage's layers, calibration/calibrate.py). The
simulator then charges it like gloo's figure (des/work.py, `cores`): on the sending and the
receiving operation, and on the host's cores, each boundary its own cut's figures
(MessageCpu.per_cut_s), each side its own: the upstream rank pays about twice the
downstream one's per message on exec-tiny (cuts after emb_7, concat, fc_0: 100-139 us
against 47-102), and the ranks of a three-stage pipeline pay what the cuts on either side of
them say (within 15 us).

Why per cut: on exec-tiny a message costs 70-80 us after `concat` and 160-175 us inside the
embedding block (cut after emb_5; m = 8, two ranks, 1F1B and async alike). Much of the
difference is gloo's TCP thread (its CPU per step, nearly all kernel time: 1.65 ms against
0.35 ms at the first rank, 0.9 against 0.4 at the second), not the bytes (fewer cross
there); slowing both ranks 3x leaves most of it (3.1 ms per step over both ranks, 2.6
slowed), so it belongs to the cut more than to how busy the cores are. One figure for a
half-way cut charged diverse plans too much (results page "Asynchronous pipelines", "A
message's CPU as the engine pays it", "A message's CPU at each cut and side").
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
    run `run` + its name; calibrate's are `calibration-<schedule>-cut<c>-<repeat>`), so a
    rescore of it can calibrate again from them."""
    return any(Path(folder).glob("runcalibration-*-cut*-*"))


def cut_plan(layers: list[str], cut: int, resource: str, schedule: str) -> Plan:
    """Two stages, layers[:cut] and layers[cut:], one unit of `resource` each."""
    if not 0 < cut < len(layers):
        raise ValueError(f"cut_plan: a cut at {cut} leaves a stage of {len(layers)} layers "
                         "empty")
    return Plan(stages=(Stage(layers=tuple(layers[:cut]), resource=resource, num_replicas=1),
                        Stage(layers=tuple(layers[cut:]), resource=resource,
                              num_replicas=1)),
                num_microbatches=MICROBATCHES, schedule=schedule)


def plan_cuts(plans: list[Plan], layers: list[str]) -> dict[str, tuple[int, ...]]:
    """Per schedule, the boundaries its multi-stage plans cut (c: after layers[c - 1])."""
    out: dict[str, set[int]] = {}
    for plan in plans:
        for stage in plan.stages[:-1]:
            out.setdefault(plan.schedule, set()).add(layers.index(stage.layers[-1]) + 1)
    return {k: tuple(sorted(v)) for k, v in sorted(out.items())}


def outside_compute_cpu(stage: dict) -> float:
    """A stage's CPU per step outside its compute and optimizer spans (measure.exec_result's
    per-stage extra: every thread of the rank, gloo's included)."""
    return max(stage["cpu_s"] - stage["compute_cpu_s"], 0.0)


def per_message_s(one_rank_s: float, pipeline_s: list[float], m: int, links_cpu: dict | None,
                  boundary_bytes: float) -> tuple[float, float]:
    """One message's CPU on each side of the cut, (upstream rank, downstream rank), from the
    calibration's figures (module docstring): one_rank_s, pipeline_s: CPU per step outside
    compute of the one-rank run and of each pipeline rank; boundary_bytes: what crosses the
    cut per step, both ways. Each rank sends m and receives m messages per step; less the
    links JSON's per-byte terms, which the simulator charges apart (0 without one; each rank
    taken to send and receive half the bytes); clipped at 0 (a noisy calibration must not
    credit CPU)."""
    if len(pipeline_s) != 2 or m < 1:
        raise ValueError("per_message_s: two pipeline ranks and m >= 1 expected")
    links_cpu = links_cpu or {}
    per_byte = (float(links_cpu.get("send_s_per_byte", 0.0))
                + float(links_cpu.get("recv_s_per_byte", 0.0)))
    up, down = ((rank - one_rank_s - per_byte * boundary_bytes / 2) / (2 * m)
                for rank in pipeline_s)
    return max(up, 0.0), max(down, 0.0)


def calibrate(plans: list[Plan], problem, links_cpu: dict | None,
              run_plan: Callable[[Plan, str], list], one_rank_runs: Callable[[int], list]
              ) -> dict[str, dict]:
    """MessageCpu's fields per schedule of the multi-stage `plans` ({} when none): the links
    JSON's (gloo's figure: all-reduce rings and any cut not measured) with `per_cut_s`, each
    boundary the plans cut measured there. `run_plan(plan, name)` runs a calibration plan
    (validate's repeats) and returns its results, `one_rank_runs(m)` the one-rank
    calibration's at m (shared with the runtime overhead's). Medians over the runs, per rank."""
    layers = list(problem.layer_names)
    cuts = plan_cuts(plans, layers)
    if not cuts:
        return {}
    alone = statistics.median(outside_compute_cpu(x.extra["stages"][0])
                              for x in one_rank_runs(MICROBATCHES))
    base = {"send_s": 0.0, "recv_s": 0.0, "send_s_per_byte": 0.0, "recv_s_per_byte": 0.0,
            **(links_cpu or {})}
    out = {}
    for schedule, at in cuts.items():
        per_cut = {}
        for c in at:
            got = run_plan(cut_plan(layers, c, problem.type_names[0], schedule),
                           f"{schedule}-cut{c}")
            ranks = [statistics.median(outside_compute_cpu(x.extra["stages"][g]) for x in got)
                     for g in range(2)]
            per_cut[layers[c - 1]] = per_message_s(alone, ranks, MICROBATCHES, links_cpu,
                                                   float(problem.boundary_bytes[c - 1]))
        out[schedule] = {**base, "per_cut_s": per_cut}
    return out
