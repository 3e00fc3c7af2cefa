"""Plan + scenario + binding -> a checked RunSpec in a new run folder, before any rank starts.

    spec, problem = prepare(RunRequest(plan="plan.json", scenario="scenarios/exec-tiny.yaml"))
    outcome = launch(spec, LaunchOptions())                     # launch/torchrun.py

Everything that can be wrong with the inputs is found here, before any process starts, as a
one-line ExecError: the request checks its own values as it is built, `prepare` what needs the
plan and the files (replicas named by --slow-replica, the checkpoint to resume from, the
fault's rank), binds every stage to a device (binding.py) and checks that the ranks fit this
machine (capacity.py). It writes plan.json and spec.json, which every rank reads.
"""

from __future__ import annotations

from pathlib import Path

from heterps_exec.data.prepare import prepare_data
from heterps_exec.launch.binding import load_binding, stage_bindings
from heterps_exec.request import ExecError, RunRequest
from heterps_exec.runtime.layout import RunSpec
from heterps_sim.core.files import new_run_folder
from heterps_sim.core.outputs import atomic_write
from heterps_sim.core.plan import Plan
from heterps_sim.inputs.model_source import layer_dicts
from heterps_sim.util import progress

MAX_RANKS = 64
"""More ranks than this on one launch is almost surely a mistake (a plan provisioned for a
production cluster); pass a plan with explicit num_replicas instead."""


def _provisioned(plan: Plan, problem, source: str) -> Plan:
    if all(s.num_replicas is not None for s in plan.stages):
        return plan
    from heterps_sim.cost.reference import evaluate_plan
    result = evaluate_plan(problem, plan)
    if not result.feasible:
        raise ExecError(f"{source}: cannot provision the plan: {result.reason}")
    return plan.with_replicas([s.num_replicas for s in result.stages])


def prepare(req: RunRequest) -> tuple[RunSpec, object]:
    """Load the scenario and the plan, check the request against them, bind every stage to a
    device, check that the ranks fit this machine (req.nnodes: the machines they share) and
    write the run folder's spec; returns (spec, problem). The request has checked its own
    values when it was built."""
    progress.phase("heterps-exec: loading the scenario and the plan, binding the stages")
    scn, problem, plan = _load(req)
    _check_against(req, plan)
    bindings = _bind(req, scn, plan)
    if req.nnodes == 1:  # several machines: each rank's GPU is its own machine's
        from heterps_exec.launch.binding import nccl_device_clash
        clash = nccl_device_clash(bindings, plan, req.binding)
        if clash:
            raise ExecError(clash)
    if req.capacity_check:  # before the model is captured, data generated or a rank started
        _check_capacity(req, scn, plan, [b.device for b in bindings], req.nnodes)
    if getattr(scn.model, "module", None):  # a user's PyTorch module (not zoo or YAML layers)
        progress.phase(f"heterps-exec: capturing {scn.model.module} (torch.export) and cutting "
                       "it at the plan's stages")
    user = _user_model(req, scn, plan)  # a user's PyTorch module: {} for zoo and YAML models
    out = Path(req.out_dir) if req.out_dir else new_run_folder("exec")
    out.mkdir(parents=True, exist_ok=True)
    spec = RunSpec(plan=plan.to_json_dict(), model=scn.model.name,
                   model_params=dict(getattr(scn.model, "params", {})), table_scale=req.table_scale,
                   model_layers=[] if user else layer_dicts(scn.model), user_model=user,
                   data_dir=req.data_dir or str(out / "data"), batch_size=scn.workload.batch_size,
                   steps=req.steps, seed=req.seed, optimizer=req.optimizer, lr=req.lr,
                   bindings=bindings, out_dir=str(out.resolve()),
                   timeout_s=req.timeout_s, warmup_steps=min(req.warmup_steps, req.steps - 1),
                   checkpoint_dir=str(Path(req.checkpoint_dir).resolve()) if req.checkpoint_dir else "",
                   checkpoint_every=req.checkpoint_every, save_state=bool(req.save_state),
                   trace=bool(req.trace), overlap=req.overlap, share=req.share,
                   slow_replicas=[list(x) for x in req.slow_replicas],
                   quantize=req.quantize, ps_shards=req.ps_shards,
                   ps_policy=req.ps_policy,
                   ps_hot_fraction=req.ps_hot_fraction, fault=dict(req.fault))
    progress.phase(f"heterps-exec: preparing the training data ({scn.data.format})")
    spec = prepare_data(spec, scn.data, req.scenario, data_dir=req.data_dir,
                        num_samples=req.num_samples)  # bad data: exit 2 before any rank
    atomic_write(out / "plan.json", _json(spec.plan))  # core.outputs: whole, fsynced
    atomic_write(out / "spec.json", spec.to_json())
    return spec, problem


def _user_model(req: RunRequest, scn, plan: Plan) -> dict:
    """The run spec's entry for a user's PyTorch module, checked against the plan."""
    from heterps_exec.model.norm_rules import refusal
    from heterps_exec.model.user_model import run_entry
    entry = run_entry(scn.model, req.scenario, plan, table_scale=req.table_scale,
                      ps_shards=req.ps_shards)
    why = refusal(scn.model.batchnorm, entry.get("norm_stages", {}), plan, req.share) \
        if entry else ""
    if why:
        raise ExecError(f"{req.scenario}: {why}")
    return entry


def _load(req: RunRequest) -> tuple[object, object, Plan]:
    """(scenario, problem, provisioned plan) the engine can run."""
    from heterps_sim.inputs.load import load_input, load_plan
    loaded = load_input(req.scenario)
    if loaded.scenario is None:
        raise ExecError(f"{req.scenario}: the engine needs a scenario YAML naming a zoo model "
                        "(a problem JSON has no layers to build)")
    scn, problem = loaded.scenario, loaded.problem
    plan = load_plan(req.plan)
    wrong = plan.problems(problem.layer_names, problem.type_names)
    if wrong:
        raise ExecError(f"{req.plan}: {wrong[0]}")
    plan = _provisioned(plan, problem, req.plan)
    if plan.schedule == "async":
        _check_async(req, plan)
    world = sum(s.num_replicas for s in plan.stages)
    if world > MAX_RANKS:
        raise ExecError(f"{req.plan}: the plan needs {world} ranks (more than {MAX_RANKS}); "
                        "give stages smaller num_replicas")
    batch = scn.workload.batch_size
    if plan.num_microbatches > batch:
        raise ExecError(f"{req.plan}: num_microbatches {plan.num_microbatches} exceeds the "
                        f"batch size {batch}")
    return scn, problem, plan


def _check_async(req: RunRequest, plan: Plan) -> None:
    """What an async run cannot combine with (one line each, before anything starts)."""
    from heterps_sim.core.asynchrony import staleness
    try:
        staleness([s.num_replicas for s in plan.stages], plan.num_microbatches)
    except ValueError as exc:
        raise ExecError(f"{req.plan}: {exc}") from None
    for flag, on in (("--share speed", req.share == "speed"), ("--overlap", req.overlap)):
        if on:
            raise ExecError(f"{req.plan}: schedule async runs without {flag} (it re-routes or "
                            "reduces per flushed step); use gpipe or 1f1b for it")


def _check_async_resume(req: RunRequest, plan: Plan, done: int) -> None:
    """An async plan resumed at step `done` reads weight versions older than the saved ones:
    the checkpoint must hold them, saved at the plan's staleness."""
    from heterps_exec.checkpoint.dcp import saved_staleness, step_dir
    from heterps_exec.runtime.versions import stash_versions
    from heterps_sim.core.asynchrony import staleness
    d = staleness([s.num_replicas for s in plan.stages], plan.num_microbatches)
    if not stash_versions(done, d):
        return
    path = step_dir(req.checkpoint_dir, done)
    saved = saved_staleness(path)
    if saved is None:
        raise ExecError(f"--checkpoint-dir: {path} was saved by a synchronous run; this async "
                        f"plan reads weights {d} step(s) behind, which it does not hold "
                        "(resume with gpipe or 1f1b, or start afresh)")
    if saved != d:
        raise ExecError(f"--checkpoint-dir: {path} was saved by an async run {saved} step(s) "
                        f"behind; this plan reads {d} behind (use the same stages and "
                        "microbatches, or gpipe / 1f1b)")


def _check_against(req: RunRequest, plan: Plan) -> None:
    """What the request names that only the plan and the files can confirm."""
    world = sum(s.num_replicas for s in plan.stages)
    missing = req.missing_replica([s.num_replicas for s in plan.stages])
    if missing:
        g, r, f = missing
        raise ExecError(f"--slow-replica {g}:{r}:{f}: no such replica, or factor < 1")
    if req.checkpoint_dir:
        from heterps_exec.checkpoint.dcp import latest_step, step_dir
        from heterps_exec.checkpoint.trust import check_step
        try:
            done = latest_step(req.checkpoint_dir)
            if done is not None:  # read as the ranks will: data only, before any rank starts
                check_step(step_dir(req.checkpoint_dir, done))
        except ValueError as exc:
            raise ExecError(f"--checkpoint-dir: {exc}") from None
        if done is not None and plan.schedule == "async":
            _check_async_resume(req, plan, done)
        if done is not None and done >= req.steps:
            raise ExecError(f"--checkpoint-dir: {req.checkpoint_dir} is already at step {done}; "
                            f"--steps {req.steps} leaves nothing to run")
        if done is not None:  # the PS's half of the same step (ps.bridge.PS_DIR)
            from heterps_exec.ps.bridge import PS_DIR
            from heterps_exec.ps.checkpoint import resume_problem
            problem = resume_problem(str(Path(req.checkpoint_dir) / PS_DIR), done - 1,
                                     req.ps_shards)
            if problem:
                raise ExecError(f"--checkpoint-dir: {problem}")
    if req.fault and not 0 <= req.fault["rank"] < world:
        raise ExecError(f"--inject-fault: rank {req.fault['rank']} outside 0..{world - 1}")
    if req.fault and not 0 <= req.fault["step"] <= req.steps:  # steps: after the last step
        raise ExecError(f"--inject-fault: step {req.fault['step']} outside 0..{req.steps}")


def _check_capacity(req: RunRequest, scn, plan: Plan, devices: list[str], nnodes: int = 1) -> None:
    """Refuse a run whose ranks would not fit this machine's memory or cores (capacity.py)."""
    from heterps_exec.launch.capacity import capacity_problem, run_estimate
    if getattr(scn.model, "module", None):  # a user's PyTorch module: captured once already
        from heterps_sim.inputs.torch_model import scenario_model_spec
        model = scenario_model_spec(scn.model, req.scenario, Path(req.scenario))
    else:
        from heterps_sim.inputs.model_source import section_graph
        model = section_graph(scn.model, req.scenario).to_spec()
    ranks = run_estimate(model, plan,
                         batch_size=scn.workload.batch_size, table_scale=req.table_scale,
                         ps_shards=req.ps_shards, ps_hot_fraction=req.ps_hot_fraction,
                         optimizer=req.optimizer, devices=devices)
    problem = capacity_problem(ranks, nnodes=nnodes)
    if problem:
        raise ExecError(f"{req.plan}: {problem}")


def _bind(req: RunRequest, scn, plan: Plan) -> list:
    """Every stage's device (heterps_exec.launch.binding), from the binding file or "cpu"."""
    from heterps_sim.inputs.scenario import build_cluster
    types = {t.name: t for t in build_cluster(scn.cluster, req.scenario).types}
    import torch
    return stage_bindings(load_binding(req.binding), plan, types, req.binding,
                          torch.cuda.device_count())


def _json(data) -> str:
    import json
    return json.dumps(data, indent=1) + "\n"
