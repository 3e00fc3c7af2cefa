"""Wire format between PS clients and PS ranks: frames on one TCP stream per pair (transport.py).

A client opens its stream with a hello (4 int64: HELLO_MAGIC, its global rank, VERSION, 0).
A request is a header of `REQUEST_LEN` int64, a trailer of 2 int64 (MAGIC, crc32 of the
header), then the payload (the ids' bytes followed by the values' bytes: gradients, JSON, a
path). A reply is a header of `REPLY_LEN` int64 then its payload.
```
request header: op, table, n, step, id_dtype, value_dtype, value_width, nbytes, reply_tag,
                expect (reply payload bytes the client expects; 0 = unknown),
                quantize (pulled rows / pushed gradients encoded as quantize.MODES[q]), 0
reply header:   status (0 ok, 1 error), nbytes, value (e.g. a table index), reply_tag
```
A pull's rows follow its reply header (expect = n x quantize.nbytes(dim, mode) bytes); an
error's message follows its header. Every reply names its request's tag, so a client can have
several requests in flight to one server (pipelined pulls, prefetches, asynchronous pushes)
without their replies being confused. The header carries dtype and width so that a server can
refuse a wrong dtype or shape after reading exactly the bytes that were sent, and keep serving.
A quantized push sends each gradient row as its quantize.encode bytes (value dtype uint8,
width = bytes per row); the server decodes them to float32 before the optimizer sees them.

The server reads a header and its trailer (REQUEST_FRAME bytes) before anything else: a
trailer that does not match means the stream is not PSClient's (or out of step), and the
client is dropped. Every size is bounded before anything is allocated: a payload by
MAX_REQUEST_BYTES (text by MAX_TEXT_BYTES), a reply by MAX_REPLY_BYTES, a reply tag to
1..2^31-1. A header that is well framed but asks for something else out of range gets an
error reply; its payload (if its size is within MAX_REQUEST_BYTES) is read and discarded, so
the stream stays in step and the client is served on; a payload size beyond the bound cannot
be skipped, so that client gets its error reply and is dropped.
"""

from __future__ import annotations

import json
import zlib

import numpy as np
import torch

from heterps_exec.hps.quantize import MODES

REQUEST_LEN = 12
REQUEST_BYTES = REQUEST_LEN * 8
TRAILER_BYTES = 16
REQUEST_FRAME = REQUEST_BYTES + TRAILER_BYTES
"""A request's header and trailer: what the server reads before trusting any size."""
MAGIC = int.from_bytes(b"HPS-END\0", "big")
HELLO_MAGIC = int.from_bytes(b"HPS-HI\0\0", "big")
VERSION = 2
HELLO_BYTES = 32
MAX_REQUEST_BYTES = 256 << 20
"""Largest request payload (ids + gradients); PSClient refuses to send a larger one."""
MAX_REPLY_BYTES = 256 << 20
"""Largest reply a request may ask for (rows of a pull)."""
MAX_TEXT_BYTES = 1 << 16
"""Largest JSON or path payload (declare, checkpoint), and an error message."""
TAG_LIMIT = 1 << 31
"""Reply tags are 1..TAG_LIMIT - 1."""
MAX_STEP = 1 << 62
REPLY_LEN = 4
REPLY_BYTES = REPLY_LEN * 8
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


def hello(rank: int) -> bytes:
    """The first bytes a client sends on its stream."""
    return np.array([HELLO_MAGIC, rank, VERSION, 0], dtype=np.int64).tobytes()


def read_hello(data: bytes) -> int | None:
    """The client rank a hello names, or None when it is not PSClient's hello."""
    magic, rank, version, spare = np.frombuffer(data, np.int64).tolist()
    return rank if (magic, version, spare) == (HELLO_MAGIC, VERSION, 0) and rank >= 0 else None


def request_parts(op: int, *, table: int = 0, step: int = 0,
                  ids: torch.Tensor | None = None, values: torch.Tensor | None = None,
                  payload: torch.Tensor | None = None, reply_tag: int = 1,
                  expect: int = 0, quantize: int = 0) -> list:
    """The buffers of one request, in order: header and trailer, then the payload's parts."""
    ids = torch.empty(0, dtype=torch.int64) if ids is None else ids
    values = torch.empty(0, dtype=torch.float32) if values is None else values
    parts = [payload] if payload is not None else [
        t.contiguous().reshape(-1).view(torch.uint8) for t in (ids, values) if t.numel()]
    nbytes = sum(p.numel() for p in parts)
    if nbytes > MAX_REQUEST_BYTES:
        raise PSError(f"a request of {nbytes} bytes exceeds the PS's limit of "
                      f"{MAX_REQUEST_BYTES}; send fewer ids at once")
    width = values.shape[-1] if values.dim() >= 2 else 0
    header = [op, table, ids.numel(), step, dtype_code(ids), dtype_code(values), width, nbytes,
              reply_tag, expect, quantize, 0]
    frame = np.concatenate([np.asarray(header, dtype=np.int64), trailer(header)]).tobytes()
    return [frame, *(memoryview(p.numpy()) for p in parts if p.numel())]


def reply_head(status: int, nbytes: int, value: int, tag: int) -> np.ndarray:
    return np.array([status, nbytes, value, tag], dtype=np.int64)


class Reply:
    """A reply being awaited on `conn` (transport.Connection); `wait()` -> (value, payload)."""

    def __init__(self, conn, tag: int):
        self.conn, self.tag = conn, tag

    def wait(self) -> tuple[int, torch.Tensor]:
        status, value, payload = self.conn.reply(self.tag)
        if status != OK:
            raise PSError(bytes(payload).decode(errors="replace"))
        return value, torch.from_numpy(payload)


def trailer(header: list[int]) -> np.ndarray:
    """The 2 int64 that end a request message with this header."""
    crc = zlib.crc32(np.asarray(header, dtype=np.int64).tobytes())
    return np.array([MAGIC, crc], dtype=np.int64)


def decode_request(header: list[int], body: torch.Tensor):
    """(ids ndarray, values ndarray) of a request; sizes were checked against nbytes."""
    _, _, n, _, id_code, val_code, width, nbytes, *_ = header
    raw = body.numpy() if isinstance(body, torch.Tensor) else np.asarray(body)
    id_dtype = np.dtype(NUMPY[id_code])
    ids_end = n * id_dtype.itemsize
    ids = raw[:ids_end].view(id_dtype)
    values = raw[ids_end:].view(NUMPY[val_code])
    if width:
        values = values.reshape(-1, width)
    return ids, values


def check_header(header: list[int]) -> str | None:
    """Why a header cannot be served, or None: every field in range and every size bounded
    (what the table's shape bounds is checked by the server, which knows the table)."""
    op, table, n, step, id_code, val_code, width, nbytes, tag, expect, quantize, spare = header
    if op not in OP_NAMES:
        return f"unknown op {op}"
    if not 0 <= quantize < len(MODES):
        return f"unknown quantize code {quantize}"
    if not (0 <= id_code < len(DTYPES) and 0 <= val_code < len(DTYPES)):
        return f"unknown dtype code {id_code}/{val_code}"
    if min(n, width, nbytes, expect, table) < 0 or spare != 0 or not -1 <= step < MAX_STEP:
        return f"bad header {header}"
    if not 0 < tag < TAG_LIMIT:
        return f"reply tag {tag} outside 1..{TAG_LIMIT - 1}"
    if nbytes > MAX_REQUEST_BYTES:
        return f"payload of {nbytes} bytes exceeds the limit of {MAX_REQUEST_BYTES}"
    if expect > MAX_REPLY_BYTES:
        return f"a reply of {expect} bytes exceeds the limit of {MAX_REPLY_BYTES}"
    if op in (PULL, PUSH):
        id_size = np.dtype(NUMPY[id_code]).itemsize
        val_size = np.dtype(NUMPY[val_code]).itemsize
        rest = nbytes - n * id_size
        if rest < 0 or rest % val_size or (op == PULL and rest):
            return f"payload of {nbytes} bytes does not hold {n} ids" + (
                " (and nothing else)" if op == PULL else "")
        if width and rest // val_size % width:
            return f"values do not split into rows of width {width}"
    elif op in (DECLARE, CHECKPOINT):
        if nbytes > MAX_TEXT_BYTES:
            return f"{OP_NAMES[op]} payload of {nbytes} bytes exceeds {MAX_TEXT_BYTES}"
    elif nbytes:
        return f"{OP_NAMES[op]} takes no payload, got {nbytes} bytes"
    return None
