"""Train a plan from Python: `run_plan(RunRequest)`, the library under `heterps-exec run`.

    from heterps_exec import RunRequest, run_plan
    result = run_plan(RunRequest(plan="plan.json", scenario="scenario.yaml", steps=20,
                                 ps_shards=1))
    result["throughput"], result["extra"]["predicted"], result["extra"].get("holdout")

The command line parses its flags into the same RunRequest (its flags are generated from the
request's fields) and calls this function, so a Python run and a command-line run of the
same inputs are one code path: the request checks its values as it is built, then this
machine's part (the listening address, every output path), then `launch.prepare` the
scenario, plan, binding, model and data, all before any rank starts (a bad value raises a
one-line `UserFileError`, the CLI's exit 2); then torchrun; then the RunResult the run
folder's result.json holds and `--json` prints. Both train the same weights on the same
batches and get the same predictions.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from heterps_exec.launch.torchrun import RunFailed  # noqa: F401  (the library's name for it)
from heterps_exec.request import ExecError, RunRequest


def run_plan(request: RunRequest) -> dict | None:
    """Train `request.plan` on the scenario's model and data, as `heterps-exec run` does;
    returns the RunResult dict the CLI prints with `--json` (throughput, stages, extra:
    measured per stage, final_loss, predicted, data, holdout, run_folder), also in the run
    folder's result.json.

    Raises UserFileError (one line) for bad input before any rank starts, RunFailed when the
    ranks fail. Returns None on a node other than the one that ran rank 0 (`nnodes` > 1)."""
    _check_this_machine(request)
    with tempfile.TemporaryDirectory(prefix="heterps-plan-") as tmp:
        if isinstance(request.plan, dict):  # prepare copies it into the run folder
            path = Path(tmp) / "plan.json"
            path.write_text(json.dumps(request.plan, indent=1) + "\n")
            request = request.model_copy(update={"plan": str(path)})
        spec, problem, outcome = _start(request)
    if outcome.returncode != 0:
        raise RunFailed(failure_text(outcome))
    if not (Path(spec.out_dir) / "ranks.json").exists():
        return None
    # as JSON holds it (lists, not tuples): equal to the run folder's result.json
    return json.loads(json.dumps(_finish(request, spec, problem).to_json_dict()))


RUN_FOLDER = ("plan.json", "spec.json", "data", "torchrun*.log", "ranks.json", "state.pt",
              "result.json", "ps-live")
"""What a run folder holds (launch.prepare, launch.torchrun, runtime.worker, ps.bridge,
_finish; core.outputs adds its done.json): an existing --out holding anything else is
refused, as the simulator's run folders are, so a run never overwrites a file it did not
write (a user's result.json beside their notes)."""


def _check_this_machine(req: RunRequest) -> None:
    """What only this machine can answer, before anything is loaded: the address to listen
    on is one of its own, and every output path can be written (so a finished run is never
    lost to an unwritable --trace) without overwriting anything the run did not write."""
    from heterps_sim.core.outputs import OutputError, check_folder, check_target
    if req.bind_addr:
        from heterps_exec.launch.bind_addr import bind_problem
        problem = bind_problem(req.bind_addr)
        if problem:
            raise ExecError(problem)
    for flag, path, check in (("--out", req.out_dir, lambda p: check_folder(p, RUN_FOLDER)),
                              ("--trace", req.trace, check_target),
                              ("--save-state", req.save_state, check_target)):
        if path:
            try:
                check(path)
            except OutputError as exc:
                raise ExecError(f"{flag}: {exc}") from None


def _start(req: RunRequest):
    """Prepare the run folder and run torchrun to the end: (spec, problem, LaunchOutcome)."""
    from heterps_exec.launch.bind_addr import chosen_bind_addr
    from heterps_exec.launch.dir_lock import hold
    from heterps_exec.launch.prepare import prepare
    from heterps_exec.launch.torchrun import LaunchOptions, launch
    opts = LaunchOptions(nnodes=req.nnodes, node_rank=req.node_rank,
                         rdzv_endpoint=req.rdzv_endpoint, rdzv_id=req.rdzv_id,
                         bind_addr=chosen_bind_addr(req.bind_addr, req.nnodes,
                                                    req.rdzv_endpoint),
                         max_restarts=req.max_restarts, timeout_s=req.run_timeout_s)
    # one run per checkpoint directory (node 0 holds it for all the run's nodes)
    with hold(req.checkpoint_dir if req.node_rank == 0 else "") as lock:
        spec, problem = prepare(req)
        outcome = launch(spec, opts, keep_fds=lock.fds if lock else ())
    return spec, problem, outcome


def failure_text(outcome) -> str:
    """What a failed run reports: why, and the last lines of torchrun's log."""
    why = "timed out" if outcome.timed_out else f"failed (exit {outcome.returncode})"
    return (f"heterps-exec run: {why} after {outcome.wall_s:.1f} s; last lines of "
            f"{outcome.log}:\n{outcome.tail()}")


def _finish(req: RunRequest, spec, problem):
    """The finished run's RunResult (measured, data counts and held-out scores, both
    predictions, the run folder), written to the run folder with its trace and state as
    the request asks."""
    from heterps_exec.calibration.prediction import predict, with_prediction
    from heterps_exec.data.report import data_report
    from heterps_exec.runtime.measure import exec_result, exec_spans, load_ranks
    from heterps_sim.core.outputs import mark_complete, write_via
    from heterps_sim.core.result import save_result
    from heterps_sim.core.trace import save_trace
    parts = load_ranks(spec)
    result = exec_result(spec, problem, parts)
    data_report(spec, parts, result)  # reader counts, held-out log-loss and AUC
    result = with_prediction(result, predict(spec, problem))  # analytic and simulator, beside
    result.extra["run_folder"] = spec.out_dir
    out = Path(spec.out_dir)
    save_result(result, out / "result.json")
    if req.trace:
        save_trace(exec_spans(spec, parts), req.trace,
                   {"source": "exec", "plan": spec.plan, "emulated": result.extra["emulated"]})
    if req.save_state:
        write_via(req.save_state, lambda tmp: shutil.copyfile(out / "state.pt", tmp))
    mark_complete(out, "exec-run")  # last: the folder holds every file of the run
    return result
