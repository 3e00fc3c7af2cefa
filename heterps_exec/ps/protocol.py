"""Wire format between PS clients and PS ranks (torch.distributed point-to-point).

A request is two messages on tag 0: a header of `REQUEST_LEN` int64, then (when nbytes > 0)
one uint8 payload: the ids' bytes followed by the values' bytes (gradients, JSON, a path).
```
request header: op, table, n, step, id_dtype, value_dtype, value_width, nbytes, reply_tag,
                expect (reply payload bytes the client expects; 0 = unknown)
reply header:   status (0 ok, 1 error), nbytes, value (e.g. a table index), 0
```
With `expect` > 0 (pulls: n x dim x 4) the reply is one message of 32 + expect bytes: its
header, then the rows (an error pads it and sends its message after). Otherwise the reply is
a header, then a payload of nbytes (JSON, an error message). Every reply travels on the
request's own `reply_tag`, so a client can have several requests in flight to one server
(prefetches, asynchronous pushes) without their replies being confused. The header carries
dtype and width so that a server can refuse a wrong dtype or shape after reading exactly the
bytes that were sent, and keep serving everyone else.
"""

from __future__ import annotations

import json

import numpy as np
import torch
import torch.distributed as dist

REQUEST_LEN = 10
REPLY_LEN = 4
DECLARE, PULL, PUSH, END_STEP, CHECKPOINT, STATS, CLOSE = range(1, 8)
OP_NAMES = {DECLARE: "declare", PULL: "pull", PUSH: "push", END_STEP: "end_step",
            CHECKPOINT: "checkpoint", STATS: "stats", CLOSE: "close"}
OK, ERROR = 0, 1

DTYPES = [torch.uint8, torch.int32, torch.int64, torch.float16, torch.float32, torch.float64]
NUMPY = [np.uint8, np.int32, np.int64, np.float16, np.float32, np.float64]


class PSError(RuntimeError):
    """The server refused a request; str() is its reason."""


def dtype_code(t: torch.Tensor) -> int:
    try:
        return DTYPES.index(t.dtype)
    except ValueError:
        raise PSError(f"unsupported dtype {t.dtype}") from None


def as_bytes(*tensors: torch.Tensor) -> torch.Tensor:
    """One uint8 tensor holding the tensors' bytes back to back (no copy for a single one)."""
    parts = [t.contiguous().reshape(-1).view(torch.uint8) for t in tensors if t.numel()]
    if not parts:
        return torch.empty(0, dtype=torch.uint8)
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def text_bytes(obj) -> torch.Tensor:
    data = obj.encode() if isinstance(obj, str) else json.dumps(obj).encode()
    return torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(
        0, dtype=torch.uint8)


def send_request(group, dst: int, op: int, *, table: int = 0, step: int = 0,
                 ids: torch.Tensor | None = None, values: torch.Tensor | None = None,
                 payload: torch.Tensor | None = None, reply_tag: int = 1,
                 expect: int = 0) -> list:
    """Post a request to global rank `dst`; returns [works, header, body], which the caller
    must keep referenced until the reply arrives (gloo drops a send whose work is freed)."""
    empty = torch.empty(0, dtype=torch.int64)
    ids = empty if ids is None else ids
    values = torch.empty(0, dtype=torch.float32) if values is None else values
    body = payload if payload is not None else as_bytes(ids, values)
    width = values.shape[-1] if values.dim() >= 2 else 0
    header = torch.from_numpy(np.array([op, table, ids.numel(), step, dtype_code(ids),
                                        dtype_code(values), width, body.numel(), reply_tag,
                                        expect],
                                       dtype=np.int64))
    works = [dist.isend(header, dst, group=group)]
    if body.numel():
        works.append(dist.isend(body, dst, group=group))
    return [works, header, body]


HEAD_BYTES = REPLY_LEN * 8


class Reply:
    """A reply being received from `src` on `tag` (`expect` as in the request);
    `wait()` -> (value, payload bytes)."""

    def __init__(self, group, src: int, tag: int, expect: int = 0):
        self.group, self.src, self.tag = group, src, tag
        self.buffer = torch.empty(HEAD_BYTES + expect, dtype=torch.uint8)
        self.header = self.buffer[:HEAD_BYTES].view(torch.int64)
        self.work = dist.irecv(self.buffer, src, group=group, tag=tag)

    def wait(self) -> tuple[int, torch.Tensor]:
        self.work.wait()
        status, nbytes, value, _ = self.header.tolist()
        if status == OK and self.buffer.numel() > HEAD_BYTES:
            return value, self.buffer[HEAD_BYTES:]
        payload = torch.empty(nbytes, dtype=torch.uint8)
        if nbytes:
            dist.recv(payload, self.src, group=self.group, tag=self.tag)
        if status != OK:
            raise PSError(bytes(payload.numpy()).decode(errors="replace"))
        return value, payload


def decode_request(header: list[int], body: torch.Tensor):
    """(ids ndarray, values ndarray) of a request; sizes were checked against nbytes."""
    _, _, n, _, id_code, val_code, width, nbytes, _, _ = header
    raw = body.numpy()
    id_dtype = np.dtype(NUMPY[id_code])
    ids_end = n * id_dtype.itemsize
    ids = raw[:ids_end].view(id_dtype)
    values = raw[ids_end:].view(NUMPY[val_code])
    if width:
        values = values.reshape(-1, width)
    return ids, values


def check_header(header: list[int]) -> str | None:
    """Why a header cannot be decoded, or None."""
    op, _, n, _, id_code, val_code, width, nbytes, tag, expect = header
    if op not in OP_NAMES:
        return f"unknown op {op}"
    if not (0 <= id_code < len(DTYPES) and 0 <= val_code < len(DTYPES)):
        return f"unknown dtype code {id_code}/{val_code}"
    if n < 0 or width < 0 or nbytes < 0 or tag < 1 or expect < 0:
        return f"bad header {header}"
    if op in (PULL, PUSH):
        id_size = np.dtype(NUMPY[id_code]).itemsize
        val_size = np.dtype(NUMPY[val_code]).itemsize
        if (nbytes - n * id_size) < 0 or (nbytes - n * id_size) % val_size:
            return f"payload of {nbytes} bytes does not hold {n} ids"
        if width and (nbytes - n * id_size) // val_size % width:
            return f"values do not split into rows of width {width}"
    return None
