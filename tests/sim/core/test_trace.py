"""Spans become a valid trace-event document with one named track per actor."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from heterps_sim.core.trace import Span, chrome_trace, save_trace


def test_trace_events_tracks_and_units(tmp_path):
    spans = [
        Span(group="stages", track="stage 0 / replica 0", name="F0", category="compute",
             start_s=0.0, end_s=0.002, args={"microbatch": 0}),
        Span(group="links", track="link 0->1", name="send F0", category="transfer",
             start_s=0.002, end_s=0.0025),
        Span(group="stages", track="stage 1 / replica 0", name="F0", category="compute",
             start_s=0.0025, end_s=0.004),
    ]
    doc = chrome_trace(spans, {"plan": "x"})
    complete = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert [(e["name"], e["ts"], e["dur"]) for e in complete] == [
        ("F0", 0.0, 2000.0), ("F0", 2500.0, 1500.0), ("send F0", 2000.0, 500.0)]
    threads = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert threads == {"stage 0 / replica 0", "stage 1 / replica 0", "link 0->1"}
    processes = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert processes == {"stages", "links"}
    assert doc["otherData"] == {"plan": "x"}
    save_trace(spans, tmp_path / "t.json", {"plan": "x"})
    assert json.loads((tmp_path / "t.json").read_text()) == json.loads(json.dumps(doc))


# -- slices on one thread nest or are disjoint ---------------------------------------------------
def well_formed(doc: dict) -> list[str]:
    """Every (pid, tid) thread's complete slices pairwise disjoint or properly nested; the
    problems found (empty: Perfetto draws the trace as written)."""
    threads: dict = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            threads.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    bad = []
    for key, slices in threads.items():
        slices.sort(key=lambda x: (x[0], -x[1]))
        open_ends: list[float] = []  # the stack of slices containing the current one
        for start, end in slices:
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            if open_ends and end > open_ends[-1]:
                bad.append(f"{key}: [{start}, {end}] overlaps a slice ending at {open_ends[-1]}")
            open_ends.append(end)
    return bad


def test_the_checker_sees_an_overlap():
    doc = {"traceEvents": [{"ph": "X", "pid": 1, "tid": 1, "ts": 0.0, "dur": 2.0},
                           {"ph": "X", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0}]}
    assert well_formed(doc)
    doc["traceEvents"][1]["dur"] = 1.0  # nested: [1, 2] inside [0, 2]
    assert not well_formed(doc)


intervals = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 40), st.integers(1, 12)),
                     max_size=60)


@settings(max_examples=300, deadline=None)
@given(intervals)
def test_overlapping_spans_get_lanes_of_their_own(items):
    spans = [Span(group="ps", track=f"ps shard {t}", name=f"s{n}", category="ps",
                  start_s=a / 1e3, end_s=(a + d) / 1e3, args={"n": n})
             for n, (t, a, d) in enumerate(items)]
    doc = chrome_trace(spans)
    assert well_formed(doc) == []
    complete = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    # every span once, unchanged
    assert sorted((e["args"]["n"], e["ts"], e["dur"]) for e in complete) == sorted(
        (s.args["n"], s.start_s * 1e6, s.duration_s * 1e6) for s in spans)
    names = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e["name"] == "thread_name"}
    for t in {t for t, _, _ in items}:
        mine = [(a, a + d) for tt, a, d in items if tt == t]
        # as few lanes as the most spans at one moment (touching ends do not overlap)
        depth = max(sum(1 for a, b in mine if a <= x < b) for x in {a for a, _ in mine})
        lanes = sorted(n for n in names.values()
                       if n == f"ps shard {t}" or n.startswith(f"ps shard {t} / lane "))
        assert len(lanes) == max(depth, 1)
        tracks = {e["tid"] for e in complete if names[e["tid"]].split(" / ")[0] == f"ps shard {t}"}
        assert len(tracks) == len(lanes)


def test_instants_and_touching_spans_share_a_lane():
    spans = [Span(group="ps", track="ps shard 0", name=n, category="ps", start_s=a, end_s=b)
             for n, a, b in (("a", 0.0, 1.0), ("b", 1.0, 2.0), ("i", 2.0, 2.0), ("j", 2.0, 2.0),
                             ("c", 2.0, 3.0))]
    doc = chrome_trace(spans)
    assert {e["tid"] for e in doc["traceEvents"] if e["ph"] == "X"} == {1}
    assert well_formed(doc) == []


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sets(st.sampled_from(
    ("bubbles", "allreduce", "transfers", "contention", "ps", "jitter", "stragglers",
     "preemption"))))
def test_simulated_traces_nest_or_are_disjoint_on_every_thread(seed, effects):
    """Random problems, plans, schedules and effects (des/invariants.py): the simulator's
    trace is well formed on every thread (the PS shards' concurrent requests, links' messages
    in flight, preempted and redone work) and keeps every span."""
    from heterps_sim.des import simulate
    from heterps_sim.des.invariants import options, random_case
    case = random_case(seed)
    run = simulate(case.problem, case.plan, seed=case.seed,
                   options=options(case, frozenset(effects) | {"ps"}), record_spans=True)
    doc = chrome_trace(run.spans)
    assert well_formed(doc) == []
    assert sum(e["ph"] == "X" for e in doc["traceEvents"]) == len(run.spans)
