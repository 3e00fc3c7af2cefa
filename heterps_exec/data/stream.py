"""Global batches from a stream of rows (criteo, parquet, factory), in bounded memory.

    stream = RowStream(source, mapper, batch_size=256, seed=0, shuffle_rows=0)
    stream.batch(0), stream.batch(1), ...    # {raw tensor: [256, width]}, in order
    stream.prefetch(start, stop); stream.next_batch()    # the engine's way (background thread)

The order is a function of the file, the seed and `shuffle_rows` only: step n's batch is the
good rows n*B .. (n+1)*B - 1 of an endless sequence of epochs over the training rows, each
epoch permuted within consecutive windows of `shuffle_rows` rows (rng seeded by (seed, epoch,
window)). Every stage-0 replica of every layout, and the single-process reference, reads the
same sequence, so they train on the same global batches. A step before the current position
re-opens the source (the reference and a resumed run read forward only).

Memory bound: one source chunk (criteo: about `block_bytes` of text and its parsed rows),
rows waiting in the shuffle window (< shuffle_rows + one chunk), the batch being assembled
(< batch_size + one chunk), and `depth` finished batches in the prefetch queue.
`stats()["peak_buffered_rows"]` reports the most rows ever held between chunk and batch.

Malformed rows are skipped, counted and reported (`stats()`), never fatal: whether there are
too many is decided before any rank starts (check.py).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator

import numpy as np

from heterps_exec.data.criteo import MAX_EXAMPLES


class DataStreamError(RuntimeError):
    """The source ran dry (an epoch without a single good row)."""


class RowStream:
    """Fixed-size global batches from a row source (see the module docstring)."""

    def __init__(self, source, mapper: Callable, *, batch_size: int, seed: int = 0,
                 shuffle_rows: int = 0, split: str = "train") -> None:
        self.source, self.mapper = source, mapper
        self.batch_size, self.seed, self.shuffle_rows = batch_size, seed, shuffle_rows
        self.split = split
        self.endless = split == "train"
        self.lines = self.bad = self.epochs = self.peak = 0
        self.examples: list[str] = []
        self._iter: Iterator | None = None
        self._next_step = 0
        self._queue: queue.Queue | None = None
        self._buffered = 0

    # -- rows ------------------------------------------------------------------------------
    def _good_chunks(self) -> Iterator[dict[str, np.ndarray]]:
        """Mapped good rows, chunk by chunk, over endless epochs (one for a held-out split)."""
        epoch = 0
        while True:
            rows = 0
            window = RowQueue()
            count = 0
            for chunk in self.source.chunks(self.split):
                self.lines += chunk.lines
                self._note_bad(chunk.bad, chunk.examples)
                if not chunk.num_rows:
                    continue
                tensors, good = self.mapper(chunk.columns)
                if not good.all():
                    first = getattr(chunk, "first_line", None)
                    self._note_bad(int((~good).sum()), [
                        f"row {first + int(i)}: label not 0/1, or an infinite value"
                        for i in np.flatnonzero(~good)[:MAX_EXAMPLES]] if first else [])
                    tensors = {k: v[good] for k, v in tensors.items()}
                n = len(next(iter(tensors.values())))
                rows += n
                if not self.shuffle_rows:
                    yield tensors
                    continue
                window.push(tensors)
                self._buffered = window.rows
                while window.rows >= self.shuffle_rows:
                    block = window.take(self.shuffle_rows)
                    self._buffered = window.rows
                    yield self._permuted(block, epoch, count)
                    count += 1
            if window.rows:
                block = window.take(window.rows)
                self._buffered = 0
                yield self._permuted(block, epoch, count)
            self.epochs += 1
            if rows == 0:
                raise DataStreamError(f"{self.source.name} ({self.split}): not a single good row")
            if not self.endless:
                return
            epoch += 1

    def _permuted(self, block: dict, epoch: int, window: int) -> dict:
        n = len(next(iter(block.values())))
        order = np.random.default_rng([self.seed, epoch, window]).permutation(n)
        return {k: v[order] for k, v in block.items()}

    def _note_bad(self, count: int, examples: list[str]) -> None:
        self.bad += count
        room = MAX_EXAMPLES - len(self.examples)
        if room > 0:
            self.examples += examples[:room]

    def batches(self) -> Iterator[dict[str, np.ndarray]]:
        """Global batches in order (a held-out split ends with a last, shorter batch)."""
        pending = RowQueue()
        for tensors in self._good_chunks():
            pending.push(tensors)
            self.peak = max(self.peak, pending.rows + self._buffered)
            while pending.rows >= self.batch_size:
                yield pending.take(self.batch_size)
        if pending.rows:
            yield pending.take(pending.rows)

    # -- by step ---------------------------------------------------------------------------
    def batch(self, step: int) -> dict[str, np.ndarray]:
        """Step `step`'s global batch (forward from the current position, else re-opened)."""
        if self._iter is None or step < self._next_step:
            self._iter, self._next_step = self.batches(), 0
        while self._next_step < step:
            next(self._iter)
            self._next_step += 1
        self._next_step += 1
        return next(self._iter)

    def prefetch(self, start: int, stop: int, depth: int = 2) -> None:
        """Start loading steps start..stop-1 in the background (next_batch() takes them)."""
        self._queue = queue.Queue(maxsize=depth)
        threading.Thread(target=self._fill, args=(start, stop), daemon=True).start()

    def _fill(self, start: int, stop: int) -> None:
        try:
            for step in range(start, stop):
                self._queue.put((step, self.batch(step)))
        except Exception as exc:  # handed to the trainer, which raises it
            self._queue.put((None, exc))

    def next_batch(self) -> tuple[int, dict[str, np.ndarray]]:
        if self._queue is None:
            raise RuntimeError("call prefetch(start, stop) first")
        step, batch = self._queue.get()
        if step is None:
            raise batch
        return step, batch

    def stats(self) -> dict:
        """What the reader has consumed so far (it reads up to `depth` batches ahead)."""
        return {"rows_read": self.lines, "bad_rows": self.bad, "bad_examples": self.examples,
                "epochs_completed": self.epochs, "peak_buffered_rows": self.peak}


class RowQueue:
    """Rows waiting in order; `take(n)` copies only the n rows it returns."""

    def __init__(self) -> None:
        self.parts: list[dict] = []
        self.offset = 0  # rows of parts[0] already taken
        self.rows = 0

    def push(self, tensors: dict) -> None:
        n = len(next(iter(tensors.values())))
        if n:
            self.parts.append(tensors)
            self.rows += n

    def take(self, n: int) -> dict:
        pieces, need = [], min(n, self.rows)
        while need:
            part = self.parts[0]
            size = len(next(iter(part.values())))
            k = min(need, size - self.offset)
            pieces.append({key: v[self.offset:self.offset + k] for key, v in part.items()})
            self.offset += k
            need -= k
            if self.offset == size:
                self.parts.pop(0)
                self.offset = 0
        self.rows -= sum(len(next(iter(p.values()))) for p in pieces)
        if len(pieces) == 1:
            return {k: np.ascontiguousarray(v) for k, v in pieces[0].items()}
        return {k: np.concatenate([p[k] for p in pieces]) for k in pieces[0]}
