"""Spans become a valid trace-event document with one named track per actor."""

import json

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
