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

Every request message ends in a trailer of 2 int64, (MAGIC, crc32 of the header): a receive
does not say how many bytes arrived, so the server finds the trailer where the header says the
message ends (and zeroes what it used), and a message shorter than its header claims is an
error, never parsed from an earlier message's bytes. Sizes are bounded before anything is
allocated: a payload by MAX_REQUEST_BYTES (text by MAX_TEXT_BYTES), a reply by
MAX_REPLY_BYTES, a reply tag to 1..2^31-1 (gloo's tags are int32). One limit is gloo's own: a
message longer than the receive posted for it aborts the receiving process inside gloo, so a
client must never send more than REQUEST_BYTES + INLINE_BYTES + TRAILER_BYTES in a first
message, or more than its header's nbytes in a payload message (PSClient never does).
"""

from __future__ import annotations

import json
import zlib

import numpy as np
import torch
import torch.distributed as dist

from heterps_exec.hps.quantize import MODES

REQUEST_LEN = 12
REQUEST_BYTES = REQUEST_LEN * 8
INLINE_BYTES = 1 << 20
"""Largest payload sent in the same message as its header (larger ones follow it)."""
TRAILER_BYTES = 16
MAGIC = int.from_bytes(b"HPS-END\0", "big")
MAX_REQUEST_BYTES = 256 << 20
"""Largest request payload (ids + gradients); PSClient refuses to send a larger one."""
MAX_REPLY_BYTES = 256 << 20
"""Largest reply a request may ask for (rows of a pull)."""
MAX_TEXT_BYTES = 1 << 16
"""Largest JSON or path payload (declare, checkpoint)."""
TAG_LIMIT = 1 << 31
"""Reply tags are 1..TAG_LIMIT - 1 (int32 in gloo)."""
MAX_STEP = 1 << 62
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
    if nbytes > MAX_REQUEST_BYTES:
        raise PSError(f"a request of {nbytes} bytes exceeds the PS's limit of "
                      f"{MAX_REQUEST_BYTES}; send fewer ids at once")
    width = values.shape[-1] if values.dim() >= 2 else 0
    header = [op, table, ids.numel(), step, dtype_code(ids), dtype_code(values), width, nbytes,
              reply_tag, expect, quantize, 0]
    end = trailer(header)
    inline = is_inline(nbytes)
    message = np.empty(REQUEST_BYTES + (nbytes if inline else 0) + TRAILER_BYTES, dtype=np.uint8)
    message[:REQUEST_BYTES].view(np.int64)[:] = header
    message[-TRAILER_BYTES:].view(np.int64)[:] = end
    at = REQUEST_BYTES
    messages = [torch.from_numpy(message)]
    for part in parts:
        if not inline:
            messages.append(part)
            continue
        message[at:at + part.numel()] = part.numpy()
        at += part.numel()
    if not inline:  # the payload message carries the same trailer
        tail = torch.from_numpy(end.view(np.uint8).copy())
        messages[1:] = [torch.cat([*messages[1:], tail])]
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


def trailer(header: list[int]) -> np.ndarray:
    """The 2 int64 that end a request message with this header."""
    crc = zlib.crc32(np.asarray(header, dtype=np.int64).tobytes())
    return np.array([MAGIC, crc], dtype=np.int64)


def ends_at(buffer: np.ndarray, at: int, header: list[int]) -> bool:
    """Whether uint8 `buffer` holds this header's trailer at byte `at` (the message's end)."""
    if at < 0 or at + TRAILER_BYTES > buffer.size:
        return False
    return bool((buffer[at:at + TRAILER_BYTES].view(np.int64) == trailer(header)).all())


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
