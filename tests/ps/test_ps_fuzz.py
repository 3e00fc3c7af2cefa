"""No request can stop a PS: malformed messages from a raw gloo sender, each followed by a good
request that must still be answered correctly.

The fuzzing client sends raw messages (a header, a payload, a trailer, any of them broken) on
the PS group. For each it knows what the server will read (a short message reads as zeros
beyond its end), so it knows whether an answer must come (a reply tag in 1..2^31-1) and, for
the table of hand-made cases, what the error must say. After every message it pulls rows of a
table no case touches through PSClient and compares them with their exact initial values.
At the end the server's own counters must show every unanswerable message and nothing else.
"""

from __future__ import annotations

import datetime
import json
import os
import time

import numpy as np
import pytest
import torch
import torch.distributed as dist

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
)
from heterps_exec.ps.spec import TableSpec
from heterps_exec.rows import initial_rows

PROBE = TableSpec(name="probe", rows=64, dim=4)
TARGET = TableSpec(name="t", rows=50, dim=4)
FUZZ_TAG = 1 << 21  # above PSClient's own tags (1..2^20): no reply can be taken for another
REPLY_CAP = 1 << 16
WAIT = datetime.timedelta(seconds=20)


def header(op, *, table=1, n=0, step=0, id_code=2, val_code=4, width=0, nbytes=0,
           tag=FUZZ_TAG, expect=0, quantize=0, spare=0) -> list[int]:
    return [op, table, n, step, id_code, val_code, width, nbytes, tag, expect, quantize, spare]


def message(h: list[int], payload: bytes = b"", *, cut: int | None = None,
            framed: bool = True) -> np.ndarray:
    """Header + payload + trailer (if `framed`), cut to its first `cut` bytes."""
    head = np.asarray(h, dtype=np.int64).view(np.uint8)
    tail = protocol.trailer(h).view(np.uint8) if framed else np.empty(0, np.uint8)
    out = np.concatenate([head, np.frombuffer(payload, np.uint8), tail])
    return out[:cut] if cut is not None else out


def ids_bytes(*ids) -> bytes:
    return np.asarray(ids, dtype=np.int64).tobytes()


def json_bytes(obj) -> bytes:
    return json.dumps(obj).encode()


def _seen(msg: np.ndarray) -> list[int]:
    """The header as the server reads it: what did not arrive reads as zeros."""
    raw = np.zeros(REQUEST_BYTES, np.uint8)
    raw[:min(msg.size, REQUEST_BYTES)] = msg[:REQUEST_BYTES]
    return raw.view(np.int64).tolist()


def _send(group, dst, msg: np.ndarray, body: np.ndarray | None = None) -> list:
    keep = [torch.from_numpy(msg.copy())]
    if body is not None:
        keep.append(torch.from_numpy(body.copy()))
    works = [dist.isend(t, dst, group=group) for t in keep]
    return [works, keep]


def _answer(group, dst, tag: int, rows_inline: bool) -> tuple[int, str]:
    """(status, error text) of the reply on `tag`: a header with the rows (an OK pull that
    said what it expects), else a header, then its payload if it has one."""
    buf = torch.zeros(protocol.HEAD_BYTES + REPLY_CAP, dtype=torch.uint8)
    dist.irecv(buf, dst, group=group, tag=tag).wait(WAIT)
    status, nbytes, _, _ = buf[:protocol.HEAD_BYTES].view(torch.int64).tolist()
    if status == OK and rows_inline:
        return status, ""
    payload = torch.zeros(nbytes, dtype=torch.uint8)
    if nbytes:
        dist.irecv(payload, dst, group=group, tag=tag).wait(WAIT)
    return status, "" if status == OK else bytes(payload.numpy()).decode(errors="replace")


def _probe(client) -> bool:
    ids = torch.tensor([0, 5, 63, 17, 5])
    got = client.pull(PROBE.name, ids).numpy()
    want = initial_rows(PROBE.name, ids.numpy(), PROBE.dim, 0)
    return bool(np.array_equal(got, want))


def _cases(root: str) -> list[tuple[str, np.ndarray, np.ndarray | None, str | None]]:
    """(name, first message, payload message or None, expected error text or None = no answer)."""
    outside = os.path.join(os.path.dirname(root), "elsewhere")
    link = os.path.join(root, "link")
    pull3 = header(PULL, n=3, nbytes=24, expect=3 * 16)
    big = 200_000  # ids: 1.6 MB, so the payload follows the header as its own message
    big_h = header(PULL, n=big, nbytes=8 * big)
    cases = [
        ("unknown op", message(header(0)), None, "unknown op 0"),
        ("op 99", message(header(99)), None, "unknown op 99"),
        ("quantize code", message(header(STATS, quantize=9)), None, "unknown quantize code 9"),
        ("dtype code", message(header(PULL, id_code=17)), None, "unknown dtype code 17/4"),
        ("negative n", message(header(PULL, n=-1)), None, "bad header"),
        ("negative width", message(header(PUSH, width=-4)), None, "bad header"),
        ("negative table", message(header(PULL, table=-2)), None, "bad header"),
        ("negative expect", message(header(PULL, expect=-1)), None, "bad header"),
        ("spare word", message(header(STATS, spare=7)), None, "bad header"),
        ("huge step", message(header(END_STEP, step=1 << 62)), None, "bad header"),
        ("huge nbytes, nothing sent", message(header(PUSH, n=1, nbytes=1 << 40)), None,
         "exceeds the limit"),
        ("huge expect", message(header(PULL, n=1, nbytes=8, expect=1 << 40), ids_bytes(1)),
         None, "a reply of 1099511627776 bytes exceeds the limit"),
        ("tag 0", message(header(STATS, tag=0)), None, None),
        ("negative tag", message(header(STATS, tag=-5)), None, None),
        ("tag 2^31", message(header(STATS, tag=1 << 31)), None, None),
        ("tag 2^40", message(header(PULL, tag=1 << 40, n=1, nbytes=8), ids_bytes(1)), None,
         None),
        ("truncated header", message(header(STATS), cut=40), None, None),  # tag reads as 0
        ("no trailer", message(pull3, ids_bytes(1, 2, 3), framed=False), None, "shorter"),
        ("short payload", message(pull3, ids_bytes(1, 2, 3), cut=REQUEST_BYTES + 8), None,
         "shorter"),
        # the same header as a good pull, sent alone right after it: without the trailer and
        # the zeroed buffer it would be served from the good pull's bytes
        ("good pull", message(pull3, ids_bytes(1, 2, 3)), None, ""),
        ("header of the good pull alone", message(pull3, cut=REQUEST_BYTES), None, "shorter"),
        ("pull: payload beyond the ids", message(header(PULL, n=1, nbytes=12),
                                                 ids_bytes(1) + b"abcd"), None,
         "does not hold 1 ids"),
        ("pull: unknown table", message(header(PULL, table=9, n=1, nbytes=8), ids_bytes(1)),
         None, "unknown table index 9"),
        ("pull: id past the rows", message(header(PULL, n=1, nbytes=8), ids_bytes(50)), None,
         "id 50 >= rows 50"),
        ("pull: negative id", message(header(PULL, n=1, nbytes=8), ids_bytes(-3)), None,
         "negative id -3"),
        ("pull: int32 ids", message(header(PULL, n=1, nbytes=4, id_code=1),
                                    np.int32(1).tobytes()), None, "1-D int64"),
        ("pull: wrong expect", message(header(PULL, n=1, nbytes=8, expect=20), ids_bytes(1)),
         None, "the client expects 20"),
        ("push: wrong width", message(header(PUSH, n=1, width=3, nbytes=8 + 12),
                                      ids_bytes(1) + np.zeros(3, np.float32).tobytes()), None,
         "float32 (1, 4)"),
        ("push: float64", message(header(PUSH, n=1, width=4, val_code=5, nbytes=8 + 32),
                                  ids_bytes(1) + np.zeros(4).tobytes()), None, "float32 (1, 4)"),
        ("push: ragged values", message(header(PUSH, n=1, width=4, nbytes=8 + 12),
                                        ids_bytes(1) + np.zeros(3, np.float32).tobytes()), None,
         "rows of width 4"),
        ("push: int8 rows of the wrong width", message(
            header(PUSH, n=1, width=3, val_code=0, quantize=3, nbytes=8 + 3),
            ids_bytes(1) + b"abc"), None, "int8 gradients must be uint8 rows"),
        ("declare: not JSON", message(header(DECLARE, nbytes=5), b"{oops"), None, "declare:"),
        ("declare: not UTF-8", message(header(DECLARE, nbytes=2), b"\xff\xfe"), None,
         "declare:"),
        ("declare: a list", message(header(DECLARE, nbytes=2), b"[]"), None, "JSON object"),
        ("declare: unknown key", message(header(DECLARE, nbytes=len(json_bytes(
            {"name": "x", "rows": 1, "dim": 1, "evil": 1}))), json_bytes(
            {"name": "x", "rows": 1, "dim": 1, "evil": 1})), None, "evil"),
        *[(f"declare: {what}", message(header(DECLARE, nbytes=len(json_bytes(d))),
                                       json_bytes(d)), None, text) for what, d, text in [
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
        ("declare: text past its limit", message(header(DECLARE, nbytes=1 << 17)), None,
         "exceeds 65536"),
        ("checkpoint: outside the directory", message(header(CHECKPOINT, nbytes=len(outside)),
                                                      outside.encode()), None, "outside"),
        ("checkpoint: climbing out", message(header(CHECKPOINT, nbytes=len(root) + 8),
                                             (root + "/../../x").encode()), None, "outside"),
        ("checkpoint: a link out", message(header(CHECKPOINT, nbytes=len(link)),
                                           link.encode()), None, "outside"),
        ("checkpoint: NUL", message(header(CHECKPOINT, nbytes=len(root) + 2),
                                    (root + "/\0").encode()), None, "NUL"),
        ("checkpoint: a step not ended", message(header(CHECKPOINT, step=5, nbytes=len(root)),
                                                 root.encode()), None, "asked before"),
        ("end_step: negative", message(header(END_STEP, step=-1)), None, "steps are >= 0"),
        ("end_step: far ahead", message(header(END_STEP, step=10**6)), None, "skip at most"),
        ("stats with a payload", message(header(STATS, nbytes=3), b"abc"), None,
         "takes no payload"),
        ("close with a payload", message(header(CLOSE, nbytes=3), b"abc"), None,
         "takes no payload"),
        ("big pull, header not framed", message(big_h, framed=False), None, "not framed"),
        ("big pull, short payload", message(big_h),
         message([], ids_bytes(*range(1000)), framed=False), "payload shorter"),
        ("big pull, unknown table", message(header(PULL, table=5, n=big, nbytes=8 * big)),
         np.concatenate([np.arange(big, dtype=np.int64).view(np.uint8), protocol.trailer(
             header(PULL, table=5, n=big, nbytes=8 * big)).view(np.uint8)]),
         "unknown table index 5"),
    ]
    return cases


def _fuzz_client(client, index, root, seed, random_cases):
    client.declare(PROBE)
    client.declare(TARGET)
    g, dst = client.group, client.servers[0]
    assert client.tables[TARGET.name][0][dst] == 1  # the cases aim at table index 1
    os.makedirs(root, exist_ok=True)
    os.symlink(os.path.dirname(root), os.path.join(root, "link"))
    answers, failures, silent = {}, [], 0
    cases = _cases(root) + _random_cases(seed, random_cases)
    for name, msg, body, want in cases:
        keep = _send(g, dst, msg, body)
        seen = _seen(msg)
        if 0 < seen[8] < 1 << 31:
            status, text = _answer(g, dst, seen[8], seen[0] == PULL and seen[9] > 0)
            answers[name] = (status, text)
            if want is not None and want != "" and (status == OK or want not in text):
                failures.append(f"{name}: got {status} {text!r}, wanted an error with {want!r}")
            if want == "" and status != OK:
                failures.append(f"{name}: refused: {text}")
        else:
            silent += 1
            if want is not None:
                failures.append(f"{name}: no valid tag, but an answer was expected")
        for w in keep[0]:
            w.wait(WAIT)
        if not _probe(client):
            failures.append(f"after {name}: the probe rows came back wrong")
    stats = client.stats()["servers"][0]
    return {"failures": failures, "silent": silent, "cases": len(cases),
            "unanswered": stats["unanswered"], "dropped": stats["dropped_clients"],
            "answers": len(answers)}


def _random_cases(seed: int, count: int) -> list:
    """Headers drawn from values at and around every boundary, payloads of random bytes,
    framed right or cut short; never CLOSE (the fuzzer must stay a client) and never a
    message longer than the server's buffer (gloo aborts on those, see protocol.py)."""
    rng = np.random.default_rng(seed)
    pick = lambda values: int(rng.choice(np.asarray(values, dtype=np.int64)))  # noqa: E731
    edges = [-(1 << 62), -1, 0, 1, 2, 3, 4, 7, 8, 63, 64, 1 << 20, (1 << 31) - 1, 1 << 31,
             1 << 40, (1 << 63) - 1]
    out = []
    for i in range(count):
        h = header(pick([0, PULL, PUSH, DECLARE, END_STEP, CHECKPOINT, STATS, 8]),
                   table=pick([1, 2, -1, 1 << 40]),  # never 0: the probe's table n=pick(edges[2:9] + [-1, 1 << 40]),
                   step=pick(edges), id_code=pick([0, 1, 2, 5, 6, -1]),
                   val_code=pick([0, 4, 5, 6]), width=pick([0, 1, 3, 4, -1, 1 << 40]),
                   nbytes=pick([0, 1, 8, 16, 24, 40, 100, 4096, -8, 1 << 40]),
                   tag=pick([FUZZ_TAG + i, FUZZ_TAG + i, 0, -1, 1 << 31, 1 << 40]),
                   expect=pick([0, 0, 16, 48, 100, -1, 1 << 40]), quantize=pick([0, 1, 3, 4]),
                   spare=pick([0, 0, 0, 1]))
        if h[0] == PULL and 0 <= h[9] <= 4 * 16 and h[9] > 0:
            h[9] = 0 if rng.random() < 0.5 else h[9]  # now and then a rows reply of any size
        size = h[7] if 0 <= h[7] <= 4096 else int(rng.integers(0, 64))
        payload = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        cut = None if rng.random() < 0.6 else int(rng.integers(0, REQUEST_BYTES + size + 16))
        out.append((f"random {i}: {h}", message(h, payload, cut=cut,
                                                framed=rng.random() < 0.8), None, None))
    return out


@pytest.mark.timeout(180)
def test_every_malformed_request_is_answered_and_the_server_keeps_serving(tmp_path):
    root = str(tmp_path / "ckpt")
    (result,) = run_local(_fuzz_client, (root, 7, 200), num_servers=1, num_clients=1,
                          server_options={"checkpoint_dir": root}, timeout_s=150)
    assert result["failures"] == []
    assert result["dropped"] == {}
    assert result["unanswered"] == result["silent"] >= 5
    assert result["answers"] + result["silent"] == result["cases"]


def _stall_clients(client, index, how, flag):
    """Client 0 misbehaves (`how`), then client 1 pulls and must be served."""
    client.declare(PROBE)
    g, dst = client.group, client.servers[0]
    if index == 0:
        client.close = lambda: None  # it will not be answered any more: leave without a word
        if how == "stops reading":  # requests whose replies it never receives
            keep = [_send(g, dst, message(header(PULL, table=0, n=1, nbytes=8, tag=FUZZ_TAG + i),
                                          ids_bytes(i % 64))) for i in range(100)]
        else:  # announces a payload and never sends it
            keep = [_send(g, dst, message(header(PULL, table=0, n=200_000,
                                                 nbytes=1_600_000)))]
        open(flag, "w").close()
        _wait_for_file(flag + ".done")  # stay alive (not reading) until the PS is done:
        time.sleep(2.0)  # a client that disconnects ends the PS's receive (gloo), not the test
        return len(keep)
    _wait_for_file(flag)
    served = sum(_probe(client) for _ in range(30))
    dropped = client.stats()["servers"][0]["dropped_clients"]
    open(flag + ".done", "w").close()
    return served, dropped


def _wait_for_file(path: str) -> None:
    deadline = time.monotonic() + 60
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["stops reading",
                                 pytest.param("never sends the payload", marks=pytest.mark.slow)])
def test_a_client_that_stalls_is_dropped_and_the_others_are_served(tmp_path, how):
    _, (served, dropped) = run_local(_stall_clients, (how, str(tmp_path / "sent")),
                                     num_servers=1, num_clients=2,
                                     server_options={"stall_timeout_s": 1.0}, timeout_s=100)
    assert served == 30
    assert list(dropped) == ["1"]  # client 0 is global rank 1 (rank 0 serves)
    assert ("read no reply" if how == "stops reading" else "sent none") in dropped["1"]
