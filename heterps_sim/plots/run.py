"""Figures of one run, from its files only: a pipeline Gantt chart and per-stage utilisation.

    gantt_figure(trace)          trace.json (trace.chrome_trace's document) -> one row per
                                 track (stage replica, link, PS shard), one bar per span,
                                 coloured by kind: forward, backward, transfer, allreduce, ps,
                                 optimizer, preempted, idle; past MAX_ROWS rows a stage's
                                 later replicas share a row (merged_rows), as the title says
    utilisation_figure(result)   result.json (RunResult.to_json_dict()) -> per stage:
                                 utilisation, communication share and bubble

Built without pyplot (see plots/tradeoff.py); never imports the simulator or the schedulers.
"""

from __future__ import annotations

import re

from matplotlib.figure import Figure
from matplotlib.patches import Patch

KIND_COLOURS = {"forward": "#4C72B0", "backward": "#DD8452", "transfer": "#55A868",
                "allreduce": "#C44E52", "ps": "#8172B3", "optimizer": "#937860",
                "preempted": "#000000", "idle": "#DDDDDD", "other": "#999999"}
LANE = re.compile(r" / lane \d+$")
MAX_ROWS = 24
"""Rows before a stage's later replicas share one (merged_rows; the title says so)."""


def span_kind(event: dict) -> str:
    """forward | backward for compute spans named F<mb> / B<mb>; else the category."""
    cat = event.get("cat", "other")
    if cat == "compute":
        return "backward" if str(event.get("name", "")).startswith("B") else "forward"
    return cat if cat in KIND_COLOURS else "other"


def trace_rows(trace: dict) -> tuple[list[str], dict[tuple[int, int], str]]:
    """(row labels in display order, (pid, tid) -> row label).

    Stage replicas get a row each; tracks of the other groups (links, PS shards) are merged
    by the part of their name before " / " (e.g. every "link 0->1 / replica i->j" is one
    "link 0->1" row), so the stages are not drowned by per-replica-pair links. The lanes
    core.trace splits an overlapping track into ("TRACK / lane 2") are drawn on its row.
    """
    names, sort, groups = {}, {}, {}
    for e in trace.get("traceEvents", []):
        if e.get("ph") != "M":
            continue
        if e.get("name") == "process_name":
            groups[e["pid"]] = e["args"]["name"]
        elif e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e.get("name") == "thread_sort_index":
            sort[(e["pid"], e["tid"])] = e["args"]["sort_index"]
    used = {(e["pid"], e["tid"]) for e in trace.get("traceEvents", []) if e.get("ph") == "X"}
    label = {}
    for key in sorted(used, key=lambda k: (k[0], sort.get(k, k[1]))):
        name = LANE.sub("", names.get(key, f"track {key[0]}.{key[1]}"))
        label[key] = name if groups.get(key[0], "stages") == "stages" else name.split(" / ")[0]
    return list(dict.fromkeys(label.values())), label


STAGE_ROW = re.compile(r"^stage (\d+) / replica (\d+)\b")


def merged_rows(rows: list[str], max_rows: int = MAX_ROWS) -> tuple[dict[str, str], str]:
    """(row -> the row it is drawn on, a note saying what was merged; "" when nothing was).

    Past `max_rows`, each stage keeps its first replicas on rows of their own and draws the
    rest on one shared row, "stage g / replicas a-b (n)", the stages sharing the rows left
    by the other tracks as evenly as their replica counts allow (at least one row each), so
    every track of the trace is drawn and the figure says which are merged."""
    stages: dict[int, list[str]] = {}
    for row in rows:
        match = STAGE_ROW.match(row)
        if match:
            stages.setdefault(int(match.group(1)), []).append(row)
    others = len(rows) - sum(len(v) for v in stages.values())
    if len(rows) <= max_rows or not stages:
        return {r: r for r in rows}, ""
    quota = {g: 1 for g in stages}
    spare = max(max_rows - others, len(stages)) - len(stages)
    while spare > 0 and any(quota[g] < len(stages[g]) for g in stages):
        for g in stages:
            if spare > 0 and quota[g] < len(stages[g]):
                quota[g] += 1
                spare -= 1
    where = {r: r for r in rows}
    merged = []
    for g, members in stages.items():
        rest = members[quota[g] - 1:]
        if len(rest) > 1:
            first, last = (STAGE_ROW.match(r).group(2) for r in (rest[0], rest[-1]))
            shared = f"stage {g} / replicas {first}-{last} ({len(rest)})"
            where.update({r: shared for r in rest})
            merged.append(len(rest))
    note = (f"{sum(merged)} of {len(rows)} tracks drawn on {len(merged)} shared rows "
            "(\"replicas a-b (n)\": n replicas overlaid)")
    return where, note


def gantt_series(trace: dict, max_rows: int = MAX_ROWS) -> dict[tuple[str, str], list]:
    """(row label, kind) -> [(start ms, duration ms)], every span on the row it is drawn on."""
    rows, label = trace_rows(trace)
    where, _ = merged_rows(rows, max_rows)
    series: dict = {}
    for e in trace.get("traceEvents", []):
        row = label.get((e.get("pid"), e.get("tid")))
        if e.get("ph") == "X" and row is not None:
            series.setdefault((where[row], span_kind(e)), []).append((e["ts"] / 1e3,
                                                                       e["dur"] / 1e3))
    return series


def gantt_figure(trace: dict, title: str = "", max_rows: int = MAX_ROWS) -> Figure:
    """One broken_barh collection per (row, kind) present; every track of the trace is drawn
    (past `max_rows`, a stage's later replicas share a row, and the title says so)."""
    rows, _ = trace_rows(trace)
    where, note = merged_rows(rows, max_rows)
    shown = list(dict.fromkeys(where[r] for r in rows))
    pos = {r: n for n, r in enumerate(shown)}
    fig = Figure(figsize=(11.0, max(2.5, 0.3 * len(shown) + 1.8)), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    kinds = []
    for (row, kind), bars in sorted(gantt_series(trace, max_rows).items(),
                                    key=lambda kv: pos[kv[0][0]]):
        ax.broken_barh(bars, (pos[row] - 0.4, 0.8), facecolors=KIND_COLOURS[kind],
                       edgecolor="white", linewidth=0.2)
        kinds.append(kind)
    ax.set_yticks(range(len(shown)), shown, fontsize=7)
    ax.set_ylim(len(shown) - 0.5, -0.5)
    ax.set_xlabel("simulated time (ms)")
    ax.grid(True, axis="x", alpha=0.25)
    present = [k for k in KIND_COLOURS if k in kinds]
    if present:  # below the axes: it covers no bar
        fig.legend(handles=[Patch(facecolor=KIND_COLOURS[k], label=k) for k in present],
                   fontsize=7, loc="outside lower center", ncol=len(present))
    ax.set_title((title or "Pipeline timeline") + (f"\n{note}" if note else ""), fontsize=10)
    return fig


def utilisation_figure(result: dict, title: str = "") -> Figure:
    """Three bar series (utilisation, comm share, bubble), one group per stage."""
    stages = result.get("stages") or []
    labels = [f"{g}: " + ("+".join(f"{n}x{t}" for t, n in s["replicas"]) if s.get("replicas")
                          else f"{s['resource']} x{s['num_replicas']}")
              for g, s in enumerate(stages)]  # a mixed stage names every type
    fig = Figure(figsize=(max(6.5, 0.9 * len(stages) + 3.0), 4.4), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    width = 0.27
    for n, (key, label, colour) in enumerate((("utilisation", "utilisation", "#4C72B0"),
                                              ("comm_share", "communication share", "#55A868"),
                                              ("bubble", "bubble", "#C44E52"))):
        values = [float(s.get(key, 0.0) or 0.0) for s in stages]
        ax.bar([g + (n - 1) * width for g in range(len(stages))], values, width=width,
               color=colour, label=label)
    ax.set_xticks(range(len(stages)), labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("fraction of the stage's time")
    bottleneck = result.get("bottleneck_stage", -1)
    if 0 <= bottleneck < len(stages):
        ax.get_xticklabels()[bottleneck].set_fontweight("bold")
    fig.legend(fontsize=8, loc="outside lower center", ncol=3)  # below: it covers no bar
    ax.grid(True, axis="y", alpha=0.25)
    thr = float(result.get("throughput") or 0.0)
    ax.set_title(f"{title or 'Per-stage utilisation'}\n{result.get('source', '?')} result, "
                 f"{thr:,.0f} samples/s; bold: the bottleneck stage", fontsize=10)
    return fig
