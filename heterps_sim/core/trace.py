"""Spans -> a Chrome / Perfetto trace (JSON trace-event format).

A span is one thing one actor did over an interval of simulated (or measured) time: stage 2
replica 0 ran the forward of microbatch 5; link 1->2 carried its activations. `chrome_trace`
turns a list of spans into {"traceEvents": [...]} that opens in ui.perfetto.dev or
chrome://tracing: one process per group ("stages", "links", "ps"), one thread (track) per
actor, complete events ("ph": "X") in microseconds.
"""

from __future__ import annotations

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
    """The trace-event document for `spans` (sorted by track, then start)."""
    groups: dict[str, int] = {}
    tracks: dict[tuple[str, str], int] = {}
    events = []
    for s in spans:
        pid = groups.setdefault(s.group, len(groups) + 1)
        tid = tracks.setdefault((s.group, s.track), len(tracks) + 1)
        events.append({"name": s.name, "cat": s.category, "ph": "X", "pid": pid, "tid": tid,
                       "ts": s.start_s * 1e6, "dur": max(s.duration_s, 0.0) * 1e6,
                       "args": dict(s.args)})
    meta = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": g}}
            for g, pid in groups.items()]
    meta += [{"name": "thread_name", "ph": "M", "pid": groups[g], "tid": tid, "args": {"name": t}}
             for (g, t), tid in tracks.items()]
    meta += [{"name": "thread_sort_index", "ph": "M", "pid": groups[g], "tid": tid,
              "args": {"sort_index": tid}} for (g, t), tid in tracks.items()]
    events.sort(key=lambda e: (e["pid"], e["tid"], e["ts"]))
    return {"traceEvents": meta + events, "displayTimeUnit": "ms",
            "otherData": dict(metadata or {})}


def save_trace(spans, path: str | Path, metadata: dict | None = None) -> None:
    from heterps_sim.core.outputs import atomic_write  # whole or absent, fsynced
    atomic_write(Path(path), json.dumps(chrome_trace(spans, metadata)) + "\n")
