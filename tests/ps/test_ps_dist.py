"""PS ranks and clients in separate processes (gloo over loopback)."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from torch import nn

from heterps_exec.model.rows import initial_rows
from heterps_exec.ps import protocol
from heterps_exec.ps.embedding import PSEmbeddingBag
from heterps_exec.ps.local import run_local
from heterps_exec.ps.protocol import PSError
from heterps_exec.ps.spec import TableSpec

ROWS, DIM, BAG, BATCH, STEPS, MICRO = 40, 4, 3, 8, 6, 2


def _batches(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, ROWS, (BATCH, BAG), generator=g),
             torch.randn(BATCH, 1, generator=g)) for _ in range(STEPS * MICRO)]


def _model(emb: nn.Module) -> nn.Module:
    torch.manual_seed(3)
    return nn.ModuleDict({"emb": emb, "head": nn.Linear(DIM, 1)})


def _train(model, opt, batches, end_step=None):
    for step in range(STEPS):
        opt.zero_grad()
        for ids, y in batches[step * MICRO:(step + 1) * MICRO]:
            loss = ((model["head"](model["emb"](ids)) - y) ** 2).mean() / MICRO
            loss.backward()
        opt.step()
        if end_step is not None:
            end_step(step)


def _ps_trainer(client, index, lr):
    """Train one model per optimizer, one after the other (step numbers keep counting).

    Client 1 pushes nothing: it sends bad requests, then ends every step late."""
    if index == 1:
        errors = _bad_client(client, 0)
        return errors, _slow_steps(client, 2 * STEPS)
    out, offset, marks = {}, 0, []

    def end_step(step):
        marks.append(time.time())
        client.end_step(step)
        marks.append(time.time())

    for optimizer in ("sgd", "adagrad"):
        spec = TableSpec(name=f"emb_{optimizer}.tables.0", rows=ROWS, dim=DIM,
                         optimizer=optimizer, lr=lr, initial_accumulator=0.05)
        client.declare(spec)
        model = _model(PSEmbeddingBag(spec.name, ROWS, DIM, client))
        batches = _batches()
        model["emb"].prefetch(batches[0][0])  # the first microbatch's rows travel early
        _train(model, torch.optim.SGD(model["head"].parameters(), lr=lr), batches,
               lambda step, offset=offset: end_step(step + offset))
        offset += STEPS
        rows = client.pull(spec.name, torch.arange(ROWS)).numpy()
        out[optimizer] = rows, {k: v.clone() for k, v in model["head"].state_dict().items()}
    return out, client.stats(), marks


def _slow_steps(client, num_steps):
    marks = []
    for step in range(num_steps):
        time.sleep(0.05)
        marks.append(time.time())
        client.end_step(step)
        marks.append(time.time())
    return marks


@pytest.fixture(scope="module")
def world():
    """One world for the default suite: 2 PS ranks, a trainer and a misbehaving client."""
    return run_local(_ps_trainer, (0.2,), num_servers=2, num_clients=2,
                     config={"hot_fraction": 0.1, "warm_fraction": 0.1})


@pytest.fixture(scope="module")
def trained(world):
    return world[0][:2]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("optimizer", ["sgd", "adagrad"])
def test_ps_embedding_trains_like_local_embedding_bag(trained, optimizer):
    """2 PS ranks + 1 trainer == one process with nn.EmbeddingBag from the same initial rows."""
    lr = 0.2
    results, stats = trained
    rows, head = results[optimizer]
    emb = nn.EmbeddingBag(ROWS, DIM, mode="sum")
    with torch.no_grad():
        emb.weight.copy_(torch.from_numpy(
            initial_rows(f"emb_{optimizer}.tables.0", np.arange(ROWS), DIM, 0)))
    model = _model(emb)
    sparse_opt = (torch.optim.SGD([emb.weight], lr=lr) if optimizer == "sgd" else
                  torch.optim.Adagrad([emb.weight], lr=lr, initial_accumulator_value=0.05))
    dense_opt = torch.optim.SGD(model["head"].parameters(), lr=lr)

    class Both:
        def zero_grad(self):
            sparse_opt.zero_grad()
            dense_opt.zero_grad()

        def step(self):
            sparse_opt.step()
            dense_opt.step()

    _train(model, Both(), _batches())
    assert np.abs(rows - emb.weight.detach().numpy()).max() <= 1e-5
    for k, v in model["head"].state_dict().items():
        assert (head[k] - v).abs().max() <= 1e-5
    table = stats["client"][f"emb_{optimizer}.tables.0"]
    assert table["pull_calls"] == STEPS * MICRO + 1 and table["push_calls"] == STEPS * MICRO
    served = [s["tables"][f"emb_{optimizer}.tables.0"] for s in stats["servers"]]
    assert sum(s["rows_pulled"] for s in served) > 0
    assert all(s["pull_p99_s"] >= s["pull_p50_s"] > 0 for s in served)


def _bad_client(client, index):
    spec = TableSpec(name="t", rows=10, dim=2)
    client.declare(spec)
    if index == 1:  # a well-behaved neighbour keeps being served (slow test)
        for _ in range(20):
            assert client.pull("t", torch.tensor([1, 2, 3])).shape == (3, 2)
            time.sleep(0.01)
        return "served"
    dst = client.servers[0]
    t = client.tables["t"][0][dst]  # the table's index on that server
    cases = {
        "negative": dict(ids=torch.tensor([-1]), table=t),
        "too large": dict(ids=torch.tensor([10]), table=t),
        "float ids": dict(ids=torch.tensor([1.0]), table=t),
        "int32 ids": dict(ids=torch.tensor([1], dtype=torch.int32), table=t),
        "unknown table": dict(ids=torch.tensor([1]), table=5),
    }
    errors = {}
    for tag, (name, kw) in enumerate(cases.items(), start=900):
        reply = client.call(dst, protocol.PULL, reply_tag=tag, **kw)
        try:
            reply.wait()
        except PSError as exc:
            errors[name] = str(exc)
    for name, values in {"wrong width": torch.zeros(1, 3), "float64": torch.zeros(1, 2,
                                                                      dtype=torch.float64)}.items():
        reply = client.call(dst, protocol.PUSH, ids=torch.tensor([2]), values=values,
                            reply_tag=950, table=t)
        try:
            reply.wait()
        except PSError as exc:
            errors[name] = str(exc)
    try:
        client.pull("nope", torch.tensor([1]))
    except PSError as exc:
        errors["client unknown table"] = str(exc)
    try:  # through PSClient: both shards answer, one with an error
        client.pull("t", torch.tensor([[3, -4]]))
    except PSError as exc:
        errors["client negative"] = str(exc)
    assert client.pull("t", torch.tensor([9, 0, 9])).shape == (3, 2)
    return errors


def _stale_client(client, index, staleness):
    client.declare(TableSpec(name="s", rows=4, dim=1, lr=1.0))
    marks = []
    for step in range(4):
        client.push("s", torch.tensor([0]), torch.ones(1, 1))
        if index == 1:
            time.sleep(0.3)  # the slow client
        marks.append(time.time())
        client.end_step(step)
        marks.append(time.time())
    return marks


def _bad_then_stale(client, index, staleness):
    return _bad_client(client, 1 - index), _stale_client(client, index, staleness)


@pytest.mark.timeout(120)
def test_bad_requests_get_errors_and_the_server_keeps_serving(world):
    errors, _ = world[1]  # meanwhile the trainer (client 0) trained correctly
    assert "negative id -1" in errors["negative"]
    assert "id 10 >= rows 10" in errors["too large"]
    assert "1-D int64" in errors["float ids"] and "1-D int64" in errors["int32 ids"]
    assert "unknown table index 5" in errors["unknown table"]
    assert "float32 (1, 2)" in errors["wrong width"] and "float32 (1, 2)" in errors["float64"]
    assert "unknown table 'nope'" in errors["client unknown table"]
    assert "negative id -4" in errors["client negative"]


@pytest.mark.timeout(120)
def test_staleness_0_end_step_waits_for_every_client(world):
    fast, slow = world[0][2], world[1][1]
    for t in range(2 * STEPS):  # the trainer's end_step(t) returns after client 1's call
        assert fast[2 * t + 1] >= slow[2 * t] - 0.01


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_staleness_1_bounds_how_far_a_client_runs_ahead():
    """Client 0's end_step(t) returns only after slow client 1 has ended step t - 1."""
    staleness = 1
    (served, fast), (errors, slow) = run_local(_bad_then_stale, (staleness,), num_clients=2,
                                               config={"staleness": staleness})
    assert errors["negative"] and served == "served"
    for t in range(4):
        returned = fast[2 * t + 1]
        if t - staleness >= 0:
            assert returned >= slow[2 * (t - staleness)] - 0.01
    if staleness == 1:  # and it really ran ahead: step 1 ended before the slow one's step 1
        assert fast[3] < slow[2]
