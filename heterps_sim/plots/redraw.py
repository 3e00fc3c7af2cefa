"""`heterps-sim plot DIR`: redraw every figure a folder's files allow, from the files alone.

    tradeoff.csv (+ sweep.json for titles)  -> tradeoff, composition, ratios
    trace.json   (a simulator trace)        -> timeline (Gantt)
    result.json  (a run's RunResult)        -> utilisation
Each figure is saved as PNG and SVG next to its data (figures/ for a sweep). Reading files is
all this does: no scheduler, cost model or simulator is imported.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from heterps_sim.core.files import UserFileError
from heterps_sim.plots import run as plots_run
from heterps_sim.plots import tradeoff as plots

FORMATS = ("png", "svg")
"""Figures are bare matplotlib Figures (no pyplot, so no GUI backend and no global state):
PNGs are rendered by Agg, SVGs by matplotlib's SVG backend."""


class PlotError(UserFileError):
    """A folder with nothing to plot, or a file that cannot be read (one line)."""


def save_figure(fig, base: Path, formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """base.png and base.svg (or the `formats` given); returns the paths."""
    from heterps_sim.core.outputs import save_figure as save  # atomic: never a torn SVG
    return [save(fig, base.with_suffix(f".{fmt}"), fmt) for fmt in formats]


def read_sweep(folder: Path) -> tuple[pd.DataFrame, dict]:
    """tradeoff.csv and sweep.json (empty when absent)."""
    try:
        frame = pd.read_csv(folder / "tradeoff.csv", keep_default_na=False,
                            na_values={"cost_usd": ["inf", "nan", ""]})
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise PlotError(f"{folder / 'tradeoff.csv'}: cannot read ({exc})") from None
    missing = {"scheduler", "throughput_limit", "feasible", "cost_usd", "throughput"} - set(frame)
    if missing:
        raise PlotError(f"{folder / 'tradeoff.csv'}: missing columns {', '.join(sorted(missing))}")
    for col in ("cost_usd", "single_type_cost_usd", "single_type_throughput_same_cost"):
        if col in frame:
            frame[col] = pd.to_numeric(frame[col], errors="coerce")
    frame["feasible"] = frame["feasible"].astype(str).str.lower() == "true"
    meta = _read_json(folder / "sweep.json") if (folder / "sweep.json").exists() else {}
    return frame, meta


def sweep_figures(frame: pd.DataFrame, meta: dict) -> dict:
    return {"tradeoff": plots.tradeoff_figure(frame, meta),
            "composition": plots.composition_figure(frame, meta=meta),
            "ratios": plots.ratios_figure(frame, meta)}


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PlotError(f"{path}: cannot read ({exc})") from None


def redraw(folder: str | Path, formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Every figure the folder's files allow; PlotError when there is none."""
    folder = Path(folder)
    if not folder.is_dir():
        raise PlotError(f"{folder}: no such folder")
    written: list[Path] = []
    if (folder / "tradeoff.csv").exists():
        frame, meta = read_sweep(folder)
        for name, fig in sweep_figures(frame, meta).items():
            written += save_figure(fig, folder / "figures" / name, formats)
    label = folder.name
    if (folder / "trace.json").exists():
        fig = plots_run.gantt_figure(_read_json(folder / "trace.json"), f"Pipeline timeline: {label}")
        written += save_figure(fig, folder / "timeline", formats)
    if (folder / "result.json").exists():
        fig = plots_run.utilisation_figure(_read_json(folder / "result.json"),
                                           f"Per-stage utilisation: {label}")
        written += save_figure(fig, folder / "utilisation", formats)
    if not written:
        raise PlotError(f"{folder}: nothing to plot (expected tradeoff.csv, trace.json or result.json)")
    return written
