"""Shared by the engine tests: plans for exec-tiny, running `heterps-exec run`, the oracle."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import torch

from heterps_exec.cli import main as exec_main
from heterps_exec.runtime.layout import RunSpec
from heterps_exec.runtime.reference import train_reference
from heterps_sim.inputs.zoo import get_model

SCENARIO = str(Path(__file__).resolve().parents[2] / "scenarios" / "exec-tiny.yaml")
LAYERS = [la.name for la in get_model("tiny-ctr").layers]
CPU_TYPE = "xeon-icelake-16vcpu"


def tiny_plan(path: Path, cuts: list[int], replicas: list[int], *, schedule: str = "1f1b",
              m: int = 4, types: list[str] | None = None) -> Path:
    """A plan for exec-tiny cutting after the given layer counts."""
    bounds = [0, *cuts, len(LAYERS)]
    stages = [{"layers": LAYERS[lo:hi], "resource": (types or [CPU_TYPE] * len(replicas))[g],
               "num_replicas": k}
              for g, (lo, hi, k) in enumerate(zip(bounds[:-1], bounds[1:], replicas, strict=True))]
    path.write_text(json.dumps({"format_version": 1, "stages": stages,
                                "num_microbatches": m, "schedule": schedule}))
    return path


def run_exec(*args: str) -> tuple[int, str, str]:
    """`heterps-exec` in this process (it spawns torchrun): (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = exec_main(list(args))
    return code, out.getvalue(), err.getvalue()


def run_three_steps_exactly(tmp_path: Path, scenario, plan: dict, *extra: str) -> dict:
    """`heterps-exec run` of `plan` on `scenario` for 3 steps (lr 0.1, state saved), checked
    against single-process training (assert_matches_reference); returns result.json's dict."""
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    code, out, err = run_exec("run", str(tmp_path / "plan.json"), "--scenario", str(scenario),
                              "--out", str(tmp_path / "run"), "--rank-timeout", "90", "--json",
                              "--steps", "3", "--lr", "0.1", "--save-state",
                              str(tmp_path / "state.pt"), *extra)
    assert code == 0, err
    result = json.loads(out)
    assert_matches_reference(tmp_path / "run", tmp_path / "state.pt", result)
    return result


def assert_matches_reference(run_dir: Path, state_path: Path, result: dict | None = None,
                             atol: float = 1e-5) -> None:
    """Weights (and the losses, when given) equal single-process training on the batches."""
    spec = RunSpec.load(run_dir / "spec.json")
    losses, want = train_reference(spec)
    got = torch.load(state_path)
    assert sorted(got) == sorted(want)
    worst = max(float((got[k] - want[k]).abs().max()) for k in want)
    assert worst <= atol, f"max abs weight difference {worst}"
    if result is not None:
        measured = result["extra"]["losses"]
        first = result["extra"]["first_step"]
        expected = [x / spec.batch_size for x in losses[first:]]
        assert len(measured) == len(expected)
        assert max((abs(a - b) for a, b in zip(measured, expected, strict=True)),
                   default=0.0) <= atol  # none when a restart found every step done


def replay_actions(layout, lists: dict[int, list], route) -> set:
    """Run every rank's (code, mu) list as the engine would: a forward waits for the stage
    before, a backward for the stage after, a step end for all of the stage's replicas (its
    all-reduce); sends never block. Returns the (code, stage, mu) done; fails on a deadlock,
    a microbatch run twice, or one run on a rank other than `route(stage, mu)`."""
    from heterps_sim.core.lanes import STEP, B, F
    pos = dict.fromkeys(lists, 0)
    done: set = set()
    at_step_end: dict = {}
    progress = True
    while progress:
        progress = False
        for rank, actions in lists.items():
            if pos[rank] == len(actions):
                continue
            stage, _ = layout.role(rank)
            code, mu = actions[pos[rank]]
            if code == F:
                ready = stage == 0 or (F, stage - 1, mu) in done
            elif code == B:
                ready = stage == layout.num_stages - 1 or (B, stage + 1, mu) in done
            else:
                waiting = at_step_end.setdefault((stage, mu), set())
                waiting.add(rank)
                ready = len(waiting) == layout.replicas[stage]
            if ready:
                if code != STEP:
                    assert (code, stage, mu) not in done, "a microbatch ran twice"
                    assert route(stage, mu) == rank, "microbatch on the wrong replica"
                    done.add((code, stage, mu))
                pos[rank] += 1
                progress = True
    stuck = {r: lists[r][pos[r]] for r in lists if pos[r] < len(lists[r])}
    assert not stuck, f"deadlock: {stuck}"
    return done
