"""No client can stop a PS: malformed requests, broken streams, stalls and unread replies.

The fuzzing client writes raw bytes on its own stream to the server (a header, its trailer, a
payload, any of them wrong). Requests that keep the stream in step (a well-framed header whose
payload, whatever it holds, is as long as the header says) each get an error reply naming the
problem - or none when they carry no valid reply tag - and after every one the client pulls
rows of a table no case touches and compares them with their exact initial values; at the end
the server's own counters show every unanswerable request and nothing else. Requests that
break the stream (bytes that are not a request, a payload too large to read or skip, a
message far longer than any request) and clients that stall (stop in the middle of a request,
stop reading their replies) are dropped - only they: a well-behaved client is served
throughout, also while a stalled one is still connected, and also after the process group's
own timeout (shorter than the PS's) has passed. Worlds of at most 4 processes, one torch
thread each, bounded timeouts.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest
import torch

from heterps_exec.model.rows import initial_rows
from heterps_exec.ps import protocol
from heterps_exec.ps.local import run_local
from heterps_exec.ps.protocol import (
    CHECKPOINT,
    CLOSE,
    DECLARE,
    END_STEP,
    OK,
    PULL,
    PUSH,
    REQUEST_BYTES,
    STATS,
    PSError,
)
from heterps_exec.ps.spec import TableSpec

PROBE = TableSpec(name="probe", rows=64, dim=4)
TARGET = TableSpec(name="t", rows=50, dim=4)
FUZZ_TAG = 1 << 21  # above PSClient's own tags (1..2^20): no reply can be taken for another


def header(op, *, table=1, n=0, step=0, id_code=2, val_code=4, width=0, nbytes=0,
           tag=FUZZ_TAG, expect=0, quantize=0, spare=0) -> list[int]:
    return [op, table, n, step, id_code, val_code, width, nbytes, tag, expect, quantize, spare]


def message(h: list[int], payload: bytes = b"", *, framed: bool = True) -> bytes:
    """Header, its trailer (or 16 bytes that are not one) and the payload."""
    head = np.asarray(h, dtype=np.int64).tobytes()
    tail = protocol.trailer(h).tobytes() if framed else bytes(16)
    return head + tail + payload


def ids_bytes(*ids) -> bytes:
    return np.asarray(ids, dtype=np.int64).tobytes()


def json_bytes(obj) -> bytes:
    return json.dumps(obj).encode()


def _answer(conn, tag: int) -> tuple[int, str]:
    status, _, payload = conn.reply(tag)
    return status, "" if status == OK else bytes(payload).decode(errors="replace")


def _probe(client) -> bool:
    ids = torch.tensor([0, 5, 63, 17, 5])
    got = client.pull(PROBE.name, ids).numpy()
    want = initial_rows(PROBE.name, ids.numpy(), PROBE.dim, 0)
    return bool(np.array_equal(got, want))


def _in_step_cases(root: str) -> list[tuple[str, bytes, str | None]]:
    """(name, bytes, expected error text; "" = served; None = no answer): every one keeps the
    stream in step."""
    outside = os.path.join(os.path.dirname(root), "elsewhere")
    link = os.path.join(root, "link")
    pull3 = header(PULL, n=3, nbytes=24, expect=3 * 16)
    big = 200_000  # ids: 1.6 MB, more than one read of the socket
    return [
        ("unknown op", message(header(0)), "unknown op 0"),
        ("op 99", message(header(99)), "unknown op 99"),
        ("quantize code", message(header(STATS, quantize=9)), "unknown quantize code 9"),
        ("dtype code", message(header(PULL, id_code=17)), "unknown dtype code 17/4"),
        ("negative n", message(header(PULL, n=-1)), "bad header"),
        ("negative width", message(header(PUSH, width=-4)), "bad header"),
        ("negative table", message(header(PULL, table=-2)), "bad header"),
        ("negative expect", message(header(PULL, expect=-1)), "bad header"),
        ("spare word", message(header(STATS, spare=7)), "bad header"),
        ("huge step", message(header(END_STEP, step=1 << 62)), "bad header"),
        ("huge expect", message(header(PULL, n=1, nbytes=8, expect=1 << 40), ids_bytes(1)),
         "a reply of 1099511627776 bytes exceeds the limit"),
        ("tag 0", message(header(STATS, tag=0)), None),
        ("negative tag", message(header(STATS, tag=-5)), None),
        ("tag 2^31", message(header(STATS, tag=1 << 31)), None),
        ("tag 2^40 with a payload", message(header(PULL, tag=1 << 40, n=1, nbytes=8),
                                            ids_bytes(1)), None),
        ("good pull", message(pull3, ids_bytes(1, 2, 3)), ""),
        ("pull: payload beyond the ids", message(header(PULL, n=1, nbytes=12),
                                                 ids_bytes(1) + b"abcd"), "does not hold 1 ids"),
        ("pull: unknown table", message(header(PULL, table=9, n=1, nbytes=8), ids_bytes(1)),
         "unknown table index 9"),
        ("pull: id past the rows", message(header(PULL, n=1, nbytes=8), ids_bytes(50)),
         "id 50 >= rows 50"),
        ("pull: negative id", message(header(PULL, n=1, nbytes=8), ids_bytes(-3)),
         "negative id -3"),
        ("pull: int32 ids", message(header(PULL, n=1, nbytes=4, id_code=1),
                                    np.int32(1).tobytes()), "1-D int64"),
        ("pull: wrong expect", message(header(PULL, n=1, nbytes=8, expect=20), ids_bytes(1)),
         "the client expects 20"),
        ("push: wrong width", message(header(PUSH, n=1, width=3, nbytes=8 + 12),
                                      ids_bytes(1) + np.zeros(3, np.float32).tobytes()),
         "float32 (1, 4)"),
        ("push: float64", message(header(PUSH, n=1, width=4, val_code=5, nbytes=8 + 32),
                                  ids_bytes(1) + np.zeros(4).tobytes()), "float32 (1, 4)"),
        ("push: ragged values", message(header(PUSH, n=1, width=4, nbytes=8 + 12),
                                        ids_bytes(1) + np.zeros(3, np.float32).tobytes()),
         "rows of width 4"),
        ("push: int8 rows of the wrong width", message(
            header(PUSH, n=1, width=3, val_code=0, quantize=3, nbytes=8 + 3),
            ids_bytes(1) + b"abc"), "int8 gradients must be uint8 rows"),
        ("declare: not JSON", message(header(DECLARE, nbytes=5), b"{oops"), "declare:"),
        ("declare: not UTF-8", message(header(DECLARE, nbytes=2), b"\xff\xfe"), "declare:"),
        ("declare: a list", message(header(DECLARE, nbytes=2), b"[]"), "JSON object"),
        *[(f"declare: {what}", message(header(DECLARE, nbytes=len(json_bytes(d))),
                                       json_bytes(d)), text) for what, d, text in [
            ("unknown key", {"name": "x", "rows": 1, "dim": 1, "evil": 1}, "evil"),
            ("rows 1e30", {"name": "x", "rows": 10**30, "dim": 4}, "rows must be an integer"),
            ("rows as text", {"name": "x", "rows": "9", "dim": 4}, "rows must be an integer"),
            ("rows as a float", {"name": "x", "rows": 1e6, "dim": 4}, "rows must be an integer"),
            ("dim 0", {"name": "x", "rows": 4, "dim": 0}, "dim must be an integer"),
            ("dim 2^20", {"name": "x", "rows": 4, "dim": 1 << 20}, "dim must be an integer"),
            ("empty name", {"name": "", "rows": 4, "dim": 4}, "table name"),
            ("NaN lr", {"name": "x", "rows": 4, "dim": 4, "lr": float("nan")}, "finite"),
            ("past the RAM budget", {"name": "x", "rows": 1 << 40, "dim": 4}, "GiB of RAM"),
            ("a second spec for t", {"name": "t", "rows": 51, "dim": 4}, "already declared"),
        ]],
        ("declare: text past its limit (payload read and skipped)",
         message(header(DECLARE, nbytes=1 << 17), b"x" * (1 << 17)), "exceeds 65536"),
        ("checkpoint: outside the directory", message(header(CHECKPOINT, nbytes=len(outside)),
                                                      outside.encode()), "outside"),
        ("checkpoint: climbing out", message(header(CHECKPOINT, nbytes=len(root) + 8),
                                             (root + "/../../x").encode()), "outside"),
        ("checkpoint: a link out", message(header(CHECKPOINT, nbytes=len(link)),
                                           link.encode()), "outside"),
        ("checkpoint: NUL", message(header(CHECKPOINT, nbytes=len(root) + 2),
                                    (root + "/\0").encode()), "NUL"),
        ("checkpoint: a step not ended", message(header(CHECKPOINT, step=5, nbytes=len(root)),
                                                 root.encode()), "asked before"),
        ("end_step: negative", message(header(END_STEP, step=-1)), "steps are >= 0"),
        ("end_step: far ahead", message(header(END_STEP, step=10**6)), "skip at most"),
        ("stats with a payload", message(header(STATS, nbytes=3), b"abc"), "takes no payload"),
        ("close with a payload", message(header(CLOSE, nbytes=3), b"abc"), "takes no payload"),
        ("big pull, unknown table", message(header(PULL, table=5, n=big, nbytes=8 * big),
                                            ids_bytes(*range(big))), "unknown table index 5"),
    ]


def _random_cases(seed: int, count: int) -> list:
    """Headers drawn from values at and around every boundary, payloads of random bytes as
    long as the header says (0..4096 bytes): every one in step; never CLOSE (the fuzzer
    must stay a client)."""
    rng = np.random.default_rng(seed)
    pick = lambda values: int(rng.choice(np.asarray(values, dtype=np.int64)))  # noqa: E731
    edges = [-(1 << 62), -1, 0, 1, 2, 3, 4, 7, 8, 63, 64, 1 << 20, (1 << 31) - 1, 1 << 31,
             1 << 40, (1 << 63) - 1]
    out = []
    for i in range(count):
        h = header(pick([0, PULL, PUSH, DECLARE, END_STEP, CHECKPOINT, STATS, 8]),
                   table=pick([1, 2, -1, 1 << 40]),  # never 0: the probe's table
                   n=pick(edges[2:9] + [-1, 1 << 40]),
                   step=pick(edges), id_code=pick([0, 1, 2, 5, 6, -1]),
                   val_code=pick([0, 4, 5, 6]), width=pick([0, 1, 3, 4, -1, 1 << 40]),
                   nbytes=pick([0, 1, 8, 16, 24, 40, 100, 4096]),
                   tag=pick([FUZZ_TAG + i, FUZZ_TAG + i, 0, -1, 1 << 31, 1 << 40]),
                   expect=pick([0, 0, 16, 48, 100, -1, 1 << 40]), quantize=pick([0, 1, 3, 4]),
                   spare=pick([0, 0, 0, 1]))
        payload = rng.integers(0, 256, h[7], dtype=np.uint8).tobytes()
        out.append((f"random {i}: {h}", message(h, payload), None))
    return out


def _fuzz_client(client, index, root, seed, random_cases):
    client.declare(PROBE)
    client.declare(TARGET)
    dst = client.servers[0]
    conn = client.conns[dst]
    assert client.tables[TARGET.name][0][dst] == 1  # the cases aim at table index 1
    os.makedirs(root, exist_ok=True)
    os.symlink(os.path.dirname(root), os.path.join(root, "link"))
    answers, failures, silent = {}, [], 0
    cases = _in_step_cases(root) + _random_cases(seed, random_cases)
    for name, raw, want in cases:
        conn.send([raw])
        seen = np.frombuffer(raw[:REQUEST_BYTES], np.int64).tolist()
        if 0 < seen[8] < 1 << 31:
            status, text = _answer(conn, seen[8])
            answers[name] = (status, text)
            if want and (status == OK or want not in text):
                failures.append(f"{name}: got {status} {text!r}, wanted an error with {want!r}")
            if want == "" and status != OK:
                failures.append(f"{name}: refused: {text}")
        else:
            silent += 1
            if want is not None:
                failures.append(f"{name}: no valid tag, but an answer was expected")
        if not _probe(client):
            failures.append(f"after {name}: the probe rows came back wrong")
    stats = client.stats()["servers"][0]
    return {"failures": failures, "silent": silent, "cases": len(cases),
            "unanswered": stats["unanswered"], "dropped": stats["dropped_clients"],
            "answers": len(answers)}


@pytest.mark.timeout(180)
def test_every_malformed_request_is_answered_and_the_server_keeps_serving(tmp_path):
    root = str(tmp_path / "ckpt")
    (result,) = run_local(_fuzz_client, (root, 7, 200), num_servers=1, num_clients=1,
                          server_options={"checkpoint_dir": root}, timeout_s=150)
    assert result["failures"] == []
    assert result["dropped"] == {}
    assert result["unanswered"] == result["silent"] >= 5
    assert result["answers"] + result["silent"] == result["cases"]


# -- requests that break the stream: only their client is dropped --------------------------

BREAKERS = {
    "a payload of 2^40 bytes announced": (message(header(PUSH, n=1, nbytes=1 << 40)),
                                          "exceeds the limit", "cannot be read or skipped"),
    "a negative payload size": (message(header(PUSH, n=1, nbytes=-8)), "bad header",
                                "cannot be read or skipped"),
    "a header without its trailer": (message(header(STATS), framed=False), None,
                                     "not a PSClient request"),
    "64 MiB of bytes that are no request": (bytes(range(256)) * (1 << 18), None,
                                            "not a PSClient request"),
}


def _breaker_clients(client, index, kinds, flag):
    """Clients 1.. each break their stream (kinds[index - 1]); client 0 is served before and
    after."""
    client.declare(PROBE)
    dst = client.servers[0]
    if index > 0:
        raw, error, _ = BREAKERS[kinds[index - 1]]
        client.close = lambda: None  # dropped: it cannot say goodbye
        try:
            client.conns[dst].send([raw])
        except PSError:
            pass  # the server may close the stream while a long message is still going out
        answer = None
        if error is not None:
            try:
                answer = _answer(client.conns[dst], FUZZ_TAG)
            except PSError as exc:
                answer = (-1, str(exc))
        try:  # the stream is closed: the next request fails at once, never hangs
            client.pull(PROBE.name, torch.tensor([1]))
            after = "served"
        except PSError as exc:
            after = str(exc)
        open(f"{flag}.{index}", "w").close()
        return answer, after
    before = _probe(client)
    for k in range(1, len(kinds) + 1):
        _wait_for_file(f"{flag}.{k}")
    served = sum(_probe(client) for _ in range(10))
    return before, served, client.stats()["servers"][0]["dropped_clients"]


@pytest.mark.slow  # a 4-process world: 25-35 s on the 2-core VM (tests/ps/test_ps_streams.py
@pytest.mark.timeout(150)  # checks the same stream layer in one process, in the default run)
@pytest.mark.parametrize("kinds", [
    ("a payload of 2^40 bytes announced", "64 MiB of bytes that are no request"),
    ("a negative payload size", "a header without its trailer")])
def test_a_client_that_breaks_its_stream_is_dropped_and_only_it(tmp_path, kinds):
    """Two clients break their streams (global ranks 2 and 3); client rank 1 is served."""
    (before, served, dropped), *broken = run_local(
        _breaker_clients, (kinds, str(tmp_path / "broke")), num_servers=1,
        num_clients=1 + len(kinds), timeout_s=140)
    assert before and served == 10
    assert sorted(dropped) == [str(2 + k) for k in range(len(kinds))]
    for k, (kind, (answer, after)) in enumerate(zip(kinds, broken, strict=True)):
        _, error, reason = BREAKERS[kind]
        assert reason in dropped[str(2 + k)], (kind, dropped)
        if error is not None:
            assert answer[0] != OK and error in answer[1], (kind, answer)
        assert after != "served" and "PS rank 0" in after, (kind, after)


# -- clients that stall: dropped after the PS's own timeout; the others are served ----------

def _stall_clients(client, index, kinds, flag):
    """Clients 1.. each stall (kinds[index - 1]) and stay connected; client 0 is served
    meanwhile, then waits for the server to drop them."""
    client.declare(PROBE)
    client.declare(TableSpec(name="wide", rows=8192, dim=16))
    dst = client.servers[0]
    conn = client.conns[dst]
    if index > 0:
        how = kinds[index - 1]
        client.close = lambda: None  # it will not be answered any more
        if how == "stops reading":  # 200 pulls of 512 KiB rows whose replies it never reads
            ids = ids_bytes(*range(8192))
            table = client.tables["wide"][0][dst]
            for i in range(200):
                conn.send([message(header(PULL, table=table, n=8192, nbytes=len(ids),
                                          tag=FUZZ_TAG + i, expect=8192 * 64), ids)])
        elif how == "never sends the payload":
            conn.send([message(header(PULL, table=0, n=200_000, nbytes=1_600_000))])
        else:  # stops in the middle of a header
            conn.send([message(header(STATS))[:40]])
        open(f"{flag}.{index}", "w").close()
        _wait_for_file(flag + ".done")  # stay connected until the other is done
        return how
    for k in range(1, len(kinds) + 1):
        _wait_for_file(f"{flag}.{k}")
    served = sum(_probe(client) for _ in range(30))
    meanwhile = client.stats()["servers"][0]["dropped_clients"]  # the stallers still there
    deadline = time.monotonic() + 60
    while True:  # then the server's stall timeout drops them
        dropped = client.stats()["servers"][0]["dropped_clients"]
        if len(dropped) == len(kinds) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    open(flag + ".done", "w").close()
    return served, meanwhile, dropped


STALLS = {"stops reading": "read no reply", "never sends the payload": "payload its header",
          "stops mid-header": "rest of a request header"}


@pytest.mark.slow  # a 4-process world with an 8 s stall timeout: 30-40 s on the 2-core VM
@pytest.mark.timeout(150)
@pytest.mark.parametrize("kinds", [("stops reading", "never sends the payload"),
                                   ("stops mid-header",)])
def test_a_client_that_stalls_is_dropped_and_the_others_are_served(tmp_path, kinds):
    """The other client is served while the stallers are still connected (before, a payload
    that never came held up every client), and the process group's timeout (2 s) is shorter
    than the PS's stall timeout (8 s): the server waits on nothing of gloo's, so it outlives
    the group timeout and drops the stallers by its own clock."""
    (served, meanwhile, dropped), *_ = run_local(
        _stall_clients, (kinds, str(tmp_path / "sent")), num_servers=1,
        num_clients=1 + len(kinds), server_options={"stall_timeout_s": 8.0},
        group_timeout_s=2.0, timeout_s=140)
    assert served == 30 and meanwhile == {}
    assert sorted(dropped) == [str(2 + k) for k in range(len(kinds))]
    for k, how in enumerate(kinds):
        assert STALLS[how] in dropped[str(2 + k)], (how, dropped)


def _wait_for_file(path: str) -> None:
    deadline = time.monotonic() + 60
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
