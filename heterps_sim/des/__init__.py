"""The SimPy simulator: what the analytic model's steady, noise-free pipeline leaves out.

    run = simulate(problem, plan, seed=0, options=DesOptions.with_effects("all"))
    run.result   RunResult(source="des"): throughput, step time, cost, per-stage utilisation,
                 bubble, comm share; extra: bubble_fraction, ps_time_s, events, ...
    run.spans    trace.Span per operation (trace.chrome_trace -> Perfetto)

The picture (stage 0 on 1 replica, stage 1 on 2, m = 4 microbatches per step, continuous 1F1B
over rounds of 2 microbatches, effects off; tests/sim/des/test_des_oracles.py has exact timelines):

    stage 0 / replica 0   F0 F1 F2 F3 B0 B1 F4 F5 B2 B3 F6 F7 ...  (1 warm-up round ahead)
    stage 1 / replica 0   F0 B0 F2 B2 F4 B4 ...                    (microbatches 0, 2, 4, ...)
    stage 1 / replica 1   F1 B1 F3 B3 F5 B5 ...                    (microbatches 1, 3, 5, ...)

Each replica is one SimPy process walking its own action list (core/lanes.py: microbatch mu runs
on replica mu mod k_g, in the order of `pipeline.stage_actions` over rounds of microbatches).
A forward waits for the activation from the stage before, a backward for the gradient from the
stage after. A microbatch costs alpha*P/m (split forward : backward = 1 - backward_fraction :
backward_fraction) and each replica also does the non-splitting work (1 - alpha)*P + S once per
step (des/work.py), so one replica's step takes exactly ET_g(k).

With every effect off (the default), schedules run as one continuous pipeline (no flush) and
transfers are folded into the sender's work as the analytic model does: the throughput is the
analytic min_g B / ET_g(k_g) (tests: within 1% on every shipped scenario and on random plans).
Each effect (options.EFFECTS) replaces one approximation by a mechanism: `bubbles` (gpipe/1f1b
flush every step), `allreduce`, `transfers`, `contention`, `ps`, `jitter`, `stragglers`,
`preemption` (des/options.py, des/effects.py); `cores` (not in "all") puts every replica on
one host's cores, as when the engine runs a plan on one machine. Deterministic per seed.

Files: options.py (DesOptions), work.py (stage work), ../lanes.py (routing, order), effects.py
(random draws), world.py (shared state), processes.py (replicas, step ends), comms.py
(messages, rings, PS requests), stats.py (records -> RunResult, spans), simulator.py
(simulate). Only this package imports simpy.
"""

from heterps_sim.des.options import (
           EFFECTS,
           HOST_EFFECTS,
           DesOptions,
           MessageCpu,
           PsOptions,
           TierOptions,
           parse_effects,
)
from heterps_sim.des.simulator import DesRun, simulate

__all__ = ["EFFECTS", "HOST_EFFECTS", "DesOptions", "DesRun", "MessageCpu", "PsOptions", "TierOptions", "parse_effects",
           "simulate"]
