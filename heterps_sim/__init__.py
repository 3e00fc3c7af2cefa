"""heterps_sim: decide where each layer of a deep network trains on heterogeneous rented hardware.

Where things live (one responsibility per module):
    spec.py        nouns: ResourceType, Layer, ModelSpec, Cluster, Workload, ProfileOptions
    catalog.py     the 64 real resource types (traces/resource_catalog.csv) + synthetic variants
    zoo.py         built-in models (2emb, ctr-dnn, matchnet, nce, dlrm, wide-deep, tiny-ctr, synthetic)
    profile.py     roofline seconds per layer x type (measured traces override)
    scenario.py    scenario YAML -> validated Scenario -> Problem
    problem.py     the numeric problem (oct_s, odt_s, alpha, prices, caps) + its JSON
    plan.py        Plan / Stage + plan.json;  result.py  RunResult + result.json
    cost_terms.py  per-stage terms of the analytic model: ET_g(k), mixed stages finishing together
    cost.py        the reference analytic cost model and provisioning (least | exact)
    cost_batch.py  the same model over many plans at once (numba)
    schedulers/    base.py (protocol), registry.py (name -> "module:Class"), exact.py, single_type.py
    pipeline.py    stage_actions: the microbatch order (gpipe | 1f1b | async), shared with the engine
    des/           the SimPy simulator: simulate(problem, plan, seed=, options=) -> DesRun
    ps/            the parameter server's hot-tier policies and the id-stream replay (torch-free),
                   shared by the simulator's PS model and heterps_exec's PS ranks
    sharing.py     speed-aware splits of a stage's microbatches (and mixed stages' shares)
    trace.py       spans -> Chrome/Perfetto trace JSON
    inputs.py      a scenario YAML or a problem JSON -> Problem;  userfiles.py  one-line errors
    tables.py      readable tables;  cli.py `heterps-sim`;  cli_des.py  its simulator commands
    sweep.py       throughput-limit sweeps (schedulers x limits, worker processes) -> a table;
                   sweep_files.py the folder it writes;  headline.py  vs the best single type
    plots.py       trade-off figures, plots_run.py Gantt + utilisation, plot_files.py `plot DIR`
                   (files only, never recomputes);  report.py  `report`;  cli_tradeoff.py  commands

Glossary:
    layer      one node of the model chain; its name is the torch module name in heterps_exec
    type       a resource type (a GPU model with its host share, or a CPU VM); j indexes types
    unit       one rented instance of a type; k units of a stage's type work in data parallel
    stage      consecutive layers on one type (maximal runs, unless same-type cuts are allowed);
               a mixed stage (plan format 2) holds replicas of several types
    plan       the stages in pipeline order (+ units per stage when fixed)
    oct / odt  one unit's compute / data-transfer seconds for one batch of B samples
    alpha      Amdahl parallel fraction of a stage's work
    TL         the throughput limit (floor), samples/s
    theta      a bottleneck throughput level tried by exact provisioning
    provisioning  choosing units per stage: least (fewest meeting TL) or exact (cheapest overall)
"""

__version__ = "0.1.0"
