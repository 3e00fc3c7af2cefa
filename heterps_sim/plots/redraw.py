"""`heterps-sim plot DIR`: redraw every figure a folder's files allow, from the files alone.

    tradeoff.csv (+ sweep.json for titles)  -> tradeoff, composition, ratios
    trace.json   (a simulator trace)        -> timeline (Gantt)
    result.json  (a run's RunResult)        -> utilisation
Each figure is saved as PNG and SVG next to its data (figures/ for a sweep). Reading files is
all this does: no scheduler, cost model or simulator is imported.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from heterps_sim.core.files import MAX_INPUT_BYTES, UserFileError
from heterps_sim.plots import run as plots_run
from heterps_sim.plots import tradeoff as plots
from heterps_sim.plots.files import read_result, read_trace

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
    """tradeoff.csv and sweep.json (empty when absent); every cell a figure reads is checked
    (plots/files.check_sweep) before anything is drawn."""
    from heterps_sim.plots.files import check_sweep
    path = folder / "tradeoff.csv"
    if path.stat().st_size > MAX_INPUT_BYTES:
        raise PlotError(f"{path}: larger than the {MAX_INPUT_BYTES // 2**20} MiB an input file "
                        "may be")
    try:
        frame = pd.read_csv(path, keep_default_na=False,
                            na_values={"cost_usd": ["inf", "nan", ""]},
                            dtype={"scheduler": str, "units": str})
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise PlotError(f"{path}: cannot read ({exc})") from None
    missing = {"scheduler", "throughput_limit", "feasible", "cost_usd", "throughput"} - set(frame)
    if missing:
        raise PlotError(f"{path}: missing columns {', '.join(sorted(missing))}")
    frame["feasible"] = frame["feasible"].astype(str).str.lower() == "true"
    check_sweep(frame, path)
    for col in ("cost_usd", "single_type_cost_usd", "single_type_throughput_same_cost",
                "throughput_limit", "throughput"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce")  # "", "inf", "nan": no plan
    meta = _read_json(folder / "sweep.json") if (folder / "sweep.json").exists() else {}
    return frame, meta


def sweep_figures(frame: pd.DataFrame, meta: dict) -> dict:
    return {"tradeoff": plots.tradeoff_figure(frame, meta),
            "composition": plots.composition_figure(frame, meta=meta),
            "ratios": plots.ratios_figure(frame, meta)}


def _read_json(path: Path) -> dict:
    """A JSON mapping (sweep.json: titles only)."""
    from heterps_sim.plots.files import read_meta
    return read_meta(path)


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
    if (folder / "trace.json").exists():  # both files checked as read (plots/files.py)
        fig = plots_run.gantt_figure(read_trace(folder / "trace.json"),
                                     f"Pipeline timeline: {label}")
        written += save_figure(fig, folder / "timeline", formats)
    if (folder / "result.json").exists():
        fig = plots_run.utilisation_figure(read_result(folder / "result.json"),
                                           f"Per-stage utilisation: {label}")
        written += save_figure(fig, folder / "utilisation", formats)
    if not written:
        raise PlotError(f"{folder}: nothing to plot (expected tradeoff.csv, trace.json or result.json)")
    return written
