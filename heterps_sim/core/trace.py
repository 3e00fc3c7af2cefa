"""Spans -> a Chrome / Perfetto trace (JSON trace-event format).

A span is one thing one actor did over an interval of simulated (or measured) time: stage 2
replica 0 ran the forward of microbatch 5; link 1->2 carried its activations. `chrome_trace`
turns a list of spans into {"traceEvents": [...]} that opens in ui.perfetto.dev or
chrome://tracing: one process per group ("stages", "links", "ps"), one thread (track) per
actor (split into lanes where its spans overlap), complete events ("ph": "X") in
microseconds.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass, field
from pathlib import Path

CATEGORIES = ("compute", "transfer", "allreduce", "ps", "optimizer", "preempted", "idle")


@dataclass(frozen=True, slots=True, kw_only=True)
class Span:
    group: str
    """Process in the trace: "stages", "links" or "ps"."""
    track: str
    """Thread in the trace, e.g. "stage 1 / replica 0 (t4)", "link 0->1", "ps shard 0"."""
    name: str
    """What happened, e.g. "F5", "B5", "send F5", "allreduce", "pull"."""
    category: str
    start_s: float
    end_s: float
    args: dict = field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


def chrome_trace(spans, metadata: dict | None = None) -> dict:
    """The trace-event document for `spans` (sorted by track, then start).

    Slices on one thread must nest or be disjoint (Perfetto draws overlapping ones on top of
    each other, or drops them); a track whose spans overlap (a PS shard serving several
    requests at once, a link carrying two messages) is split into lanes, "TRACK / lane 2",
    ... next to it, each span on the lowest lane free at its start: as few lanes as the most
    spans the track has at one moment."""
    groups: dict[str, int] = {}
    by_track: dict[tuple[str, str], list] = {}
    for s in spans:
        groups.setdefault(s.group, len(groups) + 1)
        by_track.setdefault((s.group, s.track), []).append(
            (s, s.start_s * 1e6, max(s.duration_s, 0.0) * 1e6))
    events, threads = [], []
    for (group, track), items in by_track.items():
        pid = groups[group]
        lanes = _lanes([(ts, ts + dur) for _, ts, dur in items])
        base = len(threads) + 1
        threads += [(pid, track if k == 0 else f"{track} / lane {k + 1}")
                    for k in range(max(lanes) + 1)]
        events += [{"name": s.name, "cat": s.category, "ph": "X", "pid": pid,
                    "tid": base + lane, "ts": ts, "dur": dur, "args": dict(s.args)}
                   for (s, ts, dur), lane in zip(items, lanes, strict=True)]
    meta = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": g}}
            for g, pid in groups.items()]
    meta += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
             for tid, (pid, name) in enumerate(threads, 1)]
    meta += [{"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
              "args": {"sort_index": tid}} for tid, (pid, _) in enumerate(threads, 1)]
    events.sort(key=lambda e: (e["pid"], e["tid"], e["ts"]))
    return {"traceEvents": meta + events, "displayTimeUnit": "ms",
            "otherData": dict(metadata or {})}


def _lanes(intervals: list[tuple[float, float]]) -> list[int]:
    """A lane per (start, end), in order, such that one lane's intervals never overlap
    (touching ends do not), using the lowest free lane: the fewest lanes possible."""
    order = sorted(range(len(intervals)), key=lambda i: intervals[i])
    busy: list[tuple[float, int]] = []  # (end, lane) of the lanes in use
    free: list[int] = []
    lanes = [0] * len(intervals)
    for i in order:
        start, end = intervals[i]
        while busy and busy[0][0] <= start:
            heapq.heappush(free, heapq.heappop(busy)[1])
        lane = heapq.heappop(free) if free else len(busy) + len(free)
        lanes[i] = lane
        heapq.heappush(busy, (end, lane))
    return lanes


def save_trace(spans, path: str | Path, metadata: dict | None = None) -> None:
    from heterps_sim.core.outputs import atomic_write  # whole or absent, fsynced
    atomic_write(Path(path), json.dumps(chrome_trace(spans, metadata)) + "\n")
