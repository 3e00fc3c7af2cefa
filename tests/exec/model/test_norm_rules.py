"""model.batchnorm: exact (the default), broadcast (DDP's broadcast_buffers) and sync
(SyncBatchNorm's rounds) on tests/fixtures/ctr_models/messy.py:NormDropout (a BatchNorm1d on
each side of the cut), each run held to the oracle of its own rule (runtime/reference_norms.py:
weights, running statistics, counts and losses to 1e-5), and what is refused (one line, exit 2,
before any rank starts)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import torch
import yaml

from heterps_exec.model.norm_rules import same_rounds
from heterps_exec.runtime.layout import Layout, RunSpec
from heterps_exec.runtime.reference import train_reference
from heterps_sim.core.lanes import STEP
from heterps_sim.core.plan import plan_from_dict
from heterps_sim.inputs.load import load_input
from tests.exec.helpers import run_exec, run_three_steps_exactly

NORMDROP = Path(__file__).resolve().parents[2] / "fixtures" / "ctr_models" / "normdrop.yaml"
CPU = "xeon-icelake-16vcpu"


def scenario(tmp_path: Path, rule: str | None) -> Path:
    """normdrop.yaml with model.batchnorm set (None: left out)."""
    doc = yaml.safe_load(NORMDROP.read_text())
    if rule is not None:
        doc["model"]["batchnorm"] = rule
    path = tmp_path / f"normdrop-{rule}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def plan(replicas: list[int], schedule: str, m: int = 4) -> dict:
    """NormDropout cut after two layers: mlp.1 (BatchNorm) in stage 0, mlp.5 in stage 1."""
    names = list(load_input(NORMDROP).problem.layer_names)
    bounds = [0, 2, len(names)]
    return {"format_version": 1, "num_microbatches": m, "schedule": schedule,
            "stages": [{"layers": names[a:b], "resource": CPU, "num_replicas": k}
                       for a, b, k in zip(bounds[:-1], bounds[1:], replicas, strict=True)]}


def other_rule_state(run_dir: Path, rule: str) -> dict:
    """The oracle's state for the same run under another rule."""
    spec = json.loads((run_dir / "spec.json").read_text())
    spec["user_model"]["section"]["batchnorm"] = rule
    (run_dir / "other.json").write_text(json.dumps(spec))
    return train_reference(RunSpec.load(run_dir / "other.json"))[1]


def test_the_rule_defaults_to_exact():
    assert load_input(NORMDROP).scenario.model.batchnorm == "exact"


def test_replicas_of_a_stage_walk_the_same_rounds():
    """sync's collectives match up when replica r's n-th forward (backward) is round n's for
    every replica, forwards and backwards in one order: always under gpipe; under 1f1b
    unless the replicas' warm-ups differ (same_rounds says which, and sync refuses those)."""
    for replicas in [(2, 1), (1, 2), (2, 2), (4, 2), (2, 1, 3), (3, 2)]:
        layout = Layout(replicas)
        for schedule, m in itertools.product(("gpipe", "1f1b"), (6, 12)):
            p = plan_from_dict({"format_version": 1, "num_microbatches": m,
                                "schedule": schedule, "stages": [
                                    {"layers": [f"l{g}"], "resource": CPU, "num_replicas": k}
                                    for g, k in enumerate(replicas)]})
            for g, k in enumerate(replicas):
                if m % k:
                    continue
                walks = [[(code, mu // k) if code != STEP else (code, mu)
                          for code, mu in layout.actions(schedule, g, r, m, 3)]
                         for r in range(k)]
                same = all(w == walks[0] for w in walks)
                assert same_rounds(p, g) == same
                assert same or schedule == "1f1b"
    assert not same_rounds(plan_from_dict(plan([3, 2], "1f1b", 6)), 1)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("rule,replicas,schedule,m,line", [
    ("sync", [3, 1], "1f1b", 4, "stage 0 has 3 replicas, num_microbatches is 4"),
    ("sync", [2, 1], "async", 4, "runs under gpipe or 1f1b"),
    ("broadcast", [1, 2], "async", 4, "runs under gpipe or 1f1b"),
    ("sync", [3, 2], "1f1b", 6, "the replicas of stage 1 to run their rounds in one order"),
], ids=["sync-3-of-4", "sync-async", "broadcast-async", "sync-warm-ups"])
def test_what_cannot_run_is_one_line(tmp_path, rule, replicas, schedule, m, line):
    path = scenario(tmp_path, rule)
    (tmp_path / "plan.json").write_text(json.dumps(plan(replicas, schedule, m)))
    code, _, err = run_exec("run", str(tmp_path / "plan.json"), "--scenario", str(path),
                            "--out", str(tmp_path / "run"), "--steps", "1")
    assert code == 2
    assert err.strip().count("\n") == 0 and "Traceback" not in err
    assert "model.batchnorm" in err and line in err


@pytest.mark.timeout(300)
def test_broadcast_with_speed_sharing_is_one_line(tmp_path):
    path = scenario(tmp_path, "broadcast")
    (tmp_path / "plan.json").write_text(json.dumps(plan([2, 1], "1f1b")))
    code, _, err = run_exec("run", str(tmp_path / "plan.json"), "--scenario", str(path),
                            "--out", str(tmp_path / "run"), "--steps", "1", "--share", "speed")
    assert code == 2 and err.strip().count("\n") == 0
    assert "model.batchnorm: broadcast needs the equal split" in err


def test_an_unknown_rule_is_one_line(tmp_path):
    path = scenario(tmp_path, "ddp")
    (tmp_path / "plan.json").write_text(json.dumps(plan([1, 1], "1f1b")))
    code, _, err = run_exec("run", str(tmp_path / "plan.json"), "--scenario", str(path),
                            "--out", str(tmp_path / "run"), "--steps", "1")
    assert code == 2 and err.strip().count("\n") == 0
    assert "batchnorm" in err


RUNS = [("broadcast", [2, 1], "1f1b", 4), ("broadcast", [1, 2], "gpipe", 4),
        ("broadcast", [2, 1], "gpipe", 3),  # k does not divide m: replica 0's set moves
        ("sync", [2, 1], "1f1b", 4), ("sync", [1, 2], "gpipe", 4)]


def _broadcast_worker(rank: int, store: str, out: str) -> None:
    import torch.distributed as dist

    from heterps_exec.model.norm_rules import BroadcastBuffers
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=3)
    group = dist.new_group([1, 2])  # a stage on ranks 1 and 2: rank 1 is its replica 0
    buffers = [torch.full((3,), float(rank)), torch.full((2,), 10.0 * rank),
               torch.tensor(100 * rank)]  # running_mean, running_var, num_batches_tracked
    if rank:
        BroadcastBuffers(buffers, group)()
    torch.save(buffers, f"{out}/{rank}.pt")
    dist.destroy_process_group()


@pytest.mark.timeout(120)
def test_broadcast_sends_the_stage_groups_first_rank_buffers(tmp_path):
    """DDP's coalesced broadcast from the group's rank 0 (global rank 1 here), dtypes mixed."""
    import torch.multiprocessing as mp
    mp.spawn(_broadcast_worker, args=(str(tmp_path / "store"), str(tmp_path)), nprocs=3)
    got = {r: torch.load(tmp_path / f"{r}.pt") for r in range(3)}
    for r in (1, 2):
        assert [b.tolist() for b in got[r]] == [[1.0] * 3, [10.0] * 2, 100]
        assert got[r][2].dtype == torch.int64
    assert got[0][0].tolist() == [0.0] * 3


@pytest.mark.timeout(400)
@pytest.mark.parametrize("rule,replicas,schedule,m", RUNS,
                         ids=[f"{r}-{a}-{b}-{s}-m{m}" for r, (a, b), s, m in RUNS])
def test_a_replicated_stage_trains_as_its_rules_oracle(tmp_path, rule, replicas, schedule, m):
    torch.set_num_threads(1)
    run_three_steps_exactly(tmp_path, scenario(tmp_path, rule), plan(replicas, schedule, m),
                            "--trace", str(tmp_path / "trace.json"))
    ranks = json.loads((tmp_path / "run" / "ranks.json").read_text())["ranks"]
    for part in ranks:  # broadcast: each replica of the replicated stage, at each step start
        sent = [s for s in part["spans"] if s[0] == "broadcast buffers"]
        k = replicas[part["stage"]]
        assert len(sent) == (3 if rule == "broadcast" and k > 1 else 0)
    state = torch.load(tmp_path / "state.pt")
    # the replicated stage's BatchNorm counts replica 0's forwards (broadcast: global
    # microbatches 0, 2, 4, ... of the 3 m) or the rounds (sync: m / 2 a step), the other
    # stage's every forward
    replicated, single = ("mlp.1", "mlp.5") if replicas[0] == 2 else ("mlp.5", "mlp.1")
    assert int(state[f"{replicated}.num_batches_tracked"]) == (3 * m + 1) // 2
    assert int(state[f"{single}.num_batches_tracked"]) == 3 * m
    # and the rule matters: the exact rule's statistics are other numbers
    exact = other_rule_state(tmp_path / "run", "exact")
    key = f"{replicated}.running_mean"
    assert float((state[key] - exact[key]).abs().max()) > 1e-3


# -- the oracles and the engine's sync arithmetic, in this process (fast) --------------------

def eager_model():
    from tests.exec.model.test_messy_models import batch_for
    from tests.exec.model.test_norm_dropout import stages_and_whole
    whole, _ = stages_and_whole()
    return whole, batch_for(whole.cap, 32)


def test_the_sync_oracle_with_groups_of_one_is_single_process_training():
    """One whole-batch forward with every BatchNorm cutting it per microbatch and dropout
    drawing each microbatch's masks for its rows: the per-microbatch oracle's loss,
    gradients and running statistics (so the sync oracle differs from it only by k)."""
    from heterps_exec.model.dropout import EagerDropout, microbatch
    from heterps_exec.runtime.reference_norms import sync_step
    whole, env = eager_model()
    bounds = [(0, 8), (8, 16), (16, 24), (24, 32)]
    start = {k: v.clone() for k, v in whole.state_dict().items()}
    want_loss = 0.0
    for i, (lo, hi) in enumerate(bounds):
        with microbatch(3, 1, i), EagerDropout():
            loss = whole({k: v[lo:hi] for k, v in env.items()})[1]
        (loss / 32).backward()
        want_loss += float(loss.detach())
    want = {**whole.state_dict(), **{f"grad.{n}": p.grad.clone()
                                    for n, p in whole.named_parameters() if p.grad is not None}}
    whole.load_state_dict(start)
    whole.zero_grad(set_to_none=True)
    got_loss = sync_step(whole, {}, env, 3, 1, bounds, 32)
    got = {**whole.state_dict(), **{f"grad.{n}": p.grad for n, p in whole.named_parameters()
                                    if p.grad is not None}}
    assert sorted(got) == sorted(want) and any(k.startswith("grad.") for k in got)
    assert got_loss == pytest.approx(want_loss, rel=1e-6)
    for key in want:
        assert torch.allclose(got[key].float(), want[key].float(), atol=1e-6), key


def test_the_broadcast_oracle_updates_for_replica_zeros_microbatches():
    """A BatchNorm of a stage on k = 2 replicas: with m = 3, replica 0 runs global
    microbatches 0, 2 (step 0) and 4 (step 1); the statistics are those of those alone."""
    from heterps_exec.runtime.reference_norms import replica_zero_only
    whole, env = eager_model()
    bn = whole.inner.mlp[1]
    parts = [{k: v[5 * i:5 * i + 5] for k, v in env.items()} for i in range(6)]
    start = {k: v.clone() for k, v in whole.state_dict().items()}
    with torch.no_grad():
        for mu in range(6):
            with replica_zero_only({bn: 2}, mu):
                whole(parts[mu])
        got = {k: v.clone() for k, v in whole.state_dict().items()}
        whole.load_state_dict(start)
        for mu in (0, 2, 4):
            whole(parts[mu])
    assert int(got["mlp.1.num_batches_tracked"]) == 3
    assert int(got["mlp.5.num_batches_tracked"]) == 6  # not in the map: every microbatch
    for key in ("mlp.1.running_mean", "mlp.1.running_var"):
        assert torch.allclose(got[key], whole.state_dict()[key], atol=1e-7), key


@pytest.mark.timeout(60)
def test_sync_norm_on_a_round_is_batch_norm_over_the_round(tmp_path):
    """The engine's SyncNorm over a one-rank group: F.batch_norm of the round's samples
    (output, input and weight gradients, running mean and unbiased variance)."""
    import torch.distributed as dist

    from heterps_exec.model.norm_rules import SyncNorm
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)
    try:
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(12, 5, generator=gen).requires_grad_()
        w = torch.randn(5, generator=gen).requires_grad_()
        b = torch.randn(5, generator=gen).requires_grad_()
        out_grad = torch.randn(12, 5, generator=gen)
        runs = {}
        for name, fn in (("sync", SyncNorm(dist.group.WORLD)), ("torch", torch.batch_norm)):
            stats = [torch.zeros(5), torch.ones(5)]
            y = fn(x, w, b, *stats, True, 0.1, 1e-5, False)
            grads = torch.autograd.grad(y, [x, w, b], out_grad)
            runs[name] = [y.detach(), *grads, *stats]
        for got, want in zip(runs["sync"], runs["torch"], strict=True):
            assert torch.allclose(got, want, atol=1e-5)
    finally:
        dist.destroy_process_group()
