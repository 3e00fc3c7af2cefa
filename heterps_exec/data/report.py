"""What a run says about its data: rows read, malformed rows, and the held-out scores.

    data_report(spec, parts, result)   # adds result.extra["data"] and ["holdout"]
    print(data_lines(result))          # the lines `heterps-exec run` prints under its table
"""

from __future__ import annotations

from pathlib import Path

from heterps_exec.data.readers import has_holdout
from heterps_exec.data.score import score_holdout


def data_report(spec, parts: list[dict], result) -> None:
    """Fill result.extra with the reader's counts (stage 0, replica 0) and the scores."""
    reader = next((p["data"] for p in parts if p.get("data")), None)
    result.extra["data"] = {"format": (spec.data or {}).get("format", "synthetic"),
                            **(reader or {})}
    state = Path(spec.out_dir) / "state.pt"
    result.extra["holdout"] = (score_holdout(spec, state) if has_holdout(spec) and state.exists()
                               else None)


def data_lines(result) -> str:
    d, h = result.extra.get("data") or {}, result.extra.get("holdout")
    lines = []
    if d.get("bad_rows"):
        first = f" (first: {d['bad_examples'][0]})" if d.get("bad_examples") else ""
        lines.append(f"data: {d['bad_rows']:,} malformed rows skipped among the "
                     f"{d['rows_read']:,} the reader read{first}")
    if h and "skipped" in h:
        lines.append(f"held-out rows not scored: {h['skipped']}")
    elif h:
        auc = "n/a (one class)" if h["auc"] is None else f"{h['auc']:.4f}"
        lines.append(f"held-out: {h['rows']:,} rows ({h['positives']:,} positive)   "
                     f"log-loss {h['log_loss']:.4f}   AUC {auc}"
                     + ("   (the model outputs probabilities)"
                        if h.get("output") == "probabilities" else ""))
    return "\n".join(lines)
