"""Wire format between PS clients and PS ranks (torch.distributed point-to-point).

A request is one message on tag 0: a header of `REQUEST_LEN` int64, then the payload (the
ids' bytes followed by the values' bytes: gradients, JSON, a path). The server receives every
request into one buffer of `REQUEST_BYTES + INLINE_BYTES` (gloo lets a receive be larger than
the message); a payload beyond `INLINE_BYTES` follows its header as a second message.
```
request header: op, table, n, step, id_dtype, value_dtype, value_width, nbytes, reply_tag,
                expect (reply payload bytes the client expects; 0 = unknown),
                quantize (pulled rows / pushed gradients encoded as quantize.MODES[q]), 0
reply header:   status (0 ok, 1 error), nbytes, value (e.g. a table index), 0
```
With `expect` > 0 (pulls: n x quantize.nbytes(dim, mode)) the reply is one message of
32 + expect bytes: its header, then the rows (an error pads it and sends its message after).
Otherwise the reply is a header, then a payload of nbytes (JSON, an error message). Every reply
travels on the request's own `reply_tag`, so a client can have several requests in flight to
one server (pipelined pulls, prefetches, asynchronous pushes) without their replies being
confused. The header carries dtype and width so that a server can refuse a wrong dtype or
shape after reading exactly the bytes that were sent, and keep serving everyone else.
A quantized push sends each gradient row as its quantize.encode bytes (value dtype uint8,
width = bytes per row); the server decodes them to float32 before the optimizer sees them.
"""

from __future__ import annotations

import json

import numpy as np
import torch
import torch.distributed as dist

from heterps_exec.hps.quantize import MODES

REQUEST_LEN = 12
REQUEST_BYTES = REQUEST_LEN * 8
INLINE_BYTES = 1 << 20
"""Largest payload sent in the same message as its header (larger ones follow it)."""
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


def text_bytes(obj) -> torch.Tensor:
    data = obj.encode() if isinstance(obj, str) else json.dumps(obj).encode()
    return torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(
        0, dtype=torch.uint8)


def is_inline(nbytes: int) -> bool:
    """Whether a payload of `nbytes` travels in its header's message."""
    return nbytes <= INLINE_BYTES


def send_request(group, dst: int, op: int, *, table: int = 0, step: int = 0,
                 ids: torch.Tensor | None = None, values: torch.Tensor | None = None,
                 payload: torch.Tensor | None = None, reply_tag: int = 1,
                 expect: int = 0, quantize: int = 0) -> list:
    """Post a request to global rank `dst`; returns [works, messages], which the caller must
    keep referenced until the reply arrives (gloo drops a send whose work is freed)."""
    ids = torch.empty(0, dtype=torch.int64) if ids is None else ids
    values = torch.empty(0, dtype=torch.float32) if values is None else values
    parts = [payload] if payload is not None else [
        t.contiguous().reshape(-1).view(torch.uint8) for t in (ids, values) if t.numel()]
    nbytes = sum(p.numel() for p in parts)
    width = values.shape[-1] if values.dim() >= 2 else 0
    header = [op, table, ids.numel(), step, dtype_code(ids), dtype_code(values), width, nbytes,
              reply_tag, expect, quantize, 0]
    inline = is_inline(nbytes)
    message = np.empty(REQUEST_BYTES + (nbytes if inline else 0), dtype=np.uint8)
    message[:REQUEST_BYTES].view(np.int64)[:] = header
    at = REQUEST_BYTES
    messages = [torch.from_numpy(message)]
    for part in parts:
        if not inline:
            messages.append(part)
            continue
        message[at:at + part.numel()] = part.numpy()
        at += part.numel()
    if not inline and len(messages) > 2:
        messages[1:] = [torch.cat(messages[1:])]
    works = [dist.isend(m, dst, group=group) for m in messages]
    return [works, messages]


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
    _, _, n, _, id_code, val_code, width, nbytes, *_ = header
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
    op, _, n, _, id_code, val_code, width, nbytes, tag, expect, quantize, _ = header
    if op not in OP_NAMES:
        return f"unknown op {op}"
    if not 0 <= quantize < len(MODES):
        return f"unknown quantize code {quantize}"
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
