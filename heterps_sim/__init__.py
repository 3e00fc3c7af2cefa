"""heterps_sim: decide where each layer of a deep network trains on heterogeneous rented hardware.

Where things live (a folder per role; one responsibility per module):
    core/        the contract heterps_exec shares: spec (ResourceType, Layer, ModelSpec, ...),
                 problem (oct_s, odt_s, alpha, prices, caps + JSON), plan (plan.json),
                 result (result.json), pipeline (gpipe | 1f1b | async order), lanes, sharing
                 (speed-aware splits), hps (H-PS options), trace (Perfetto JSON), files
                 (the one-line bad-input error, atomic writes); numpy + pydantic only
    inputs/      scenario YAML -> Problem: catalog (the 64 real types), zoo (built-in models),
                 graph (zoo layer graphs), roofline (seconds per layer x type), scenario
                 (validation), load (scenario or problem JSON); data/ (package data)
    cost/        the analytic model: amdahl (the provisioning formula), terms (per-stage terms),
                 reference (the reference model), batch (many plans at once, numba),
                 amdahl_numba (the formula compiled for the kernels)
    des/         the SimPy simulator: simulate(problem, plan, seed=, options=) -> DesRun
    tiers/       hot/warm/cold residency policies and id-stream replay, shared with the PS ranks
    schedulers/  search strategies only: base (protocol, Evaluator), registry (name ->
                 "module:Class"), fields (pydantic fields -> command-line flags); baselines/,
                 search/ (space, polish, level and window moves), exact/ (sweep, kernels, caps,
                 mixed, the certified flushed search), rl/ (reward; paper/ = `rl-paper`,
                 stagewise/ = `rl`)
    planner/     the one path from a problem to the printed answer: Planner (search ->
                 pricing -> check -> repair), Pricing (model, schedule, provisioning, m),
                 Answer (plan, price, proof or certified gap), check (the simulator),
                 replan + repair, baseline (the best one-type and one-stage plans)
    studies/     compare, sweep (+ sweep_files), headline, report, run_folder (what `simulate`
                 writes), effects (the simulator's effects table): they call the planner
    plots/       tradeoff, run (Gantt, utilisation), redraw (`plot DIR`), tables: files in,
                 figures out, never recomputed
    cli/         `heterps-sim`: a COMMANDS table (__init__), one module per command group
                 (inputs, schedule, des, tradeoff, train_rl) and their common helpers
    util/        plumbing the contract does not need: progress (phase lines and bars on a
                 terminal), numba_cache (where the compiled kernels are kept); imports core only
    shipped/     the files the wheel ships (scenarios, examples, traces/profiles: links in a
                 checkout); inputs/shipped.py resolves a name or a docs path to them
    testing.py   seeded problem and plan factories for tests, benchmarks and imitation

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
    pricing    how a plan is priced: the flushed closed form (default model, gpipe/1f1b) or a
               stage model (async, or the paper's); one Pricing per answer
    proven     the answer is the optimum under its pricing, proven by the exact search; else
               the certified gap (cost over a lower bound) is printed
"""

__version__ = "0.1.0"
