"""Figures are looked at: each type renders from a small result set with the expected series,
then the PNG is checked (size, not blank); `plot` redraws from the files alone."""

from __future__ import annotations

import json
import math
import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.image as mpimg  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from heterps_sim.cli import main  # noqa: E402
from heterps_sim.plots import run as plots_run  # noqa: E402
from heterps_sim.plots import tradeoff as plots  # noqa: E402
from heterps_sim.plots.redraw import save_figure  # noqa: E402

LIMITS = [1e6, 2e6, 4e6, 8e6, 16e6]


def small_sweep() -> pd.DataFrame:
    """Three schedulers x five limits: `b` misses the top two limits, `c` every limit."""
    rows = []
    for name, scale, ok in (("a", 1.0, 5), ("b", 1.3, 3), ("c", 2.0, 0)):
        for i, limit in enumerate(LIMITS):
            feasible = i < ok
            rows.append({
                "index": i, "scheduler": name, "throughput_limit": limit, "feasible": feasible,
                "cost_usd": scale * (1 + i ** 2) if feasible else math.inf,
                "throughput": limit * 1.05 if feasible else 0.0,
                "num_units": 2 ** i if feasible else 0,
                "units": (f"x1 x{2 ** i}" if i < 2 else f"x1 x{i}, x2 x{2 ** i - i}") if feasible else "",
                "single_type_cost_usd": 1.5 * (1 + i ** 2) if i < 4 else math.inf,
                "single_type_throughput_same_cost": limit if feasible else math.nan})
    return pd.DataFrame(rows)


def labelled_lines(ax) -> list:
    return [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]


def check_png(fig, tmp_path, name: str) -> np.ndarray:
    png, svg = save_figure(fig, tmp_path / name)
    assert svg.stat().st_size > 1000
    image = mpimg.imread(png)
    w, h = fig.get_size_inches() * fig.dpi
    assert image.shape[:2] == (round(h), round(w))
    rgb = image[..., :3]
    ink = (rgb.min(axis=2) < 0.9).mean()  # share of pixels that are not (near) white
    assert 0.02 < ink < 0.9, ink
    assert len(np.unique(rgb.reshape(-1, 3), axis=0)) > 20  # colours, not one flat tone
    return image


def test_tradeoff_figure(tmp_path):
    fig = plots.tradeoff_figure(small_sweep(), {"scenario": "toy", "mode": "exact"})
    main_ax, strip = fig.axes
    names = [ln.get_label() for ln in labelled_lines(main_ax)]
    assert names == ["a", "b", "Pareto front (all schedulers)"]  # c never met a limit
    assert len(strip.collections) == 2  # x marks for b and c
    assert [len(c.get_offsets()) for c in strip.collections] == [2, 5]
    front = labelled_lines(main_ax)[-1]
    assert len(front.get_xdata()) == 5  # scheduler a dominates b everywhere
    check_png(fig, tmp_path, "tradeoff")


def test_pareto_front_keeps_only_undominated_points():
    pts = pd.DataFrame({"throughput": [1, 2, 3, 4], "cost_usd": [1.0, 0.5, 2.0, 1.5]})
    assert list(plots.pareto_front(pts)["throughput"]) == [2, 4]


def test_composition_figure(tmp_path):
    frame = small_sweep()
    fig = plots.composition_figure(frame, scheduler="b")
    ax, right = fig.axes
    labels = [c.get_label() for c in ax.containers]
    assert labels == ["x1", "x2", "no plan"]  # two types, then the limits b missed
    assert len(ax.containers[0]) == len(LIMITS)
    assert len(labelled_lines(right)) == 1  # total units
    total = labelled_lines(right)[0].get_ydata()
    assert list(total[:3]) == [1, 2, 4] and np.isnan(total[3:]).all()
    check_png(fig, tmp_path, "composition")


def test_ratios_figure(tmp_path):
    fig = plots.ratios_figure(small_sweep())
    cost_ax, speed_ax = fig.axes[:2]
    assert [ln.get_label() for ln in labelled_lines(cost_ax)] == ["a", "b"]
    assert [ln.get_label() for ln in labelled_lines(speed_ax)] == ["a", "b"]
    a = labelled_lines(cost_ax)[0]
    assert list(a.get_ydata()) == pytest.approx([1.5] * 4)  # the 5th limit has no single type
    pct = cost_ax.child_axes[0]  # the "% less" axis: +50% sits where the ratio is 1.5
    assert "+50%" in [t.get_text() for t in pct.get_yticklabels()]
    check_png(fig, tmp_path, "ratios")


def toy_trace() -> dict:
    from heterps_sim.core.trace import Span, chrome_trace
    spans = []
    for s in range(2):
        for mb in range(3):
            t = 1e-3 * (mb + s)
            track = f"stage {s} / replica 0 (t4)"
            spans += [Span(group="stages", track=track, name=f"F{mb}", category="compute",
                           start_s=t, end_s=t + 8e-4),
                      Span(group="stages", track=track, name=f"B{mb}", category="compute",
                           start_s=t + 5e-3, end_s=t + 6.6e-3)]
        spans.append(Span(group="links", track=f"link 0->1 / replica 0->{s}", name="send F0",
                          category="transfer", start_s=8e-4, end_s=1e-3))
    return chrome_trace(spans)


def test_gantt_figure(tmp_path):
    trace = toy_trace()
    fig = plots_run.gantt_figure(trace)
    ax = fig.axes[0]
    # rows: two stage replicas, one merged link row; series: (row, kind) pairs
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "stage 0 / replica 0 (t4)", "stage 1 / replica 0 (t4)", "link 0->1"]
    assert len(ax.collections) == 5 == len(plots_run.gantt_series(trace))
    assert sorted(len(c.get_paths()) for c in ax.collections) == [2, 3, 3, 3, 3]
    check_png(fig, tmp_path, "timeline")


def test_utilisation_figure(tmp_path):
    result = {"source": "des", "throughput": 1e6, "bottleneck_stage": 1, "stages": [
        {"resource": "t4", "num_replicas": 2, "utilisation": 0.5, "comm_share": 0.2, "bubble": 0.1},
        {"resource": "a100", "num_replicas": 3, "utilisation": 1.0, "comm_share": 0.4, "bubble": 0.0},
        {"resource": "t4", "num_replicas": 3, "utilisation": 0.7, "comm_share": 0.1, "bubble": 0.3,
         "replicas": [["t4", 1], ["v100", 2]]}]}
    fig = plots_run.utilisation_figure(result)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0: t4 x2", "1: a100 x3",
                                                            "2: 1xt4+2xv100"]
    assert [c.get_label() for c in ax.containers] == ["utilisation", "communication share", "bubble"]
    assert [len(c) for c in ax.containers] == [3, 3, 3]
    assert [p.get_height() for p in ax.containers[0]] == [0.5, 1.0, 0.7]
    check_png(fig, tmp_path, "utilisation")


RECOMPUTING = ("heterps_sim.schedulers", "heterps_sim.schedulers.registry",
               "heterps_sim.schedulers.base", "heterps_sim.cost.reference", "heterps_sim.des",
               "heterps_sim.studies.sweep", "heterps_sim.inputs.load")
"""Modules `plot` must not need: importing any of them fails inside the tests below."""


def test_plot_redraws_a_sweep_from_its_files_only(tmp_path, capsys):
    folder = tmp_path / "sweep"
    assert main(["tradeoff", "scenarios/exec-tiny.yaml", "--points", "4", "--budget", "100",
                 "--schedulers", "exact,greedy,paddle-heuristic", "--out", str(folder)]) == 0
    before = {p: p.stat().st_mtime_ns for p in (folder / "figures").iterdir()}
    data = (folder / "tradeoff.csv").read_text()
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as mp:
        for name in RECOMPUTING:
            mp.setitem(sys.modules, name, None)
        assert main(["plot", str(folder)]) == 0
    out = capsys.readouterr().out.split()
    assert sorted(out) == sorted(str(p) for p in before)  # 3 figures x PNG + SVG
    assert all(p.stat().st_mtime_ns > t for p, t in before.items())
    assert (folder / "tradeoff.csv").read_text() == data


def test_plot_on_a_simulate_run_folder(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["simulate", "scenarios/nce-cpu-gpu.yaml", "--out", str(run)]) == 0
    assert (run / "trace.json").is_file()
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as mp:
        for name in RECOMPUTING:
            mp.setitem(sys.modules, name, None)
        assert main(["plot", str(run)]) == 0
    names = sorted(p.split("/")[-1] for p in capsys.readouterr().out.split())
    assert names == ["timeline.png", "timeline.svg", "utilisation.png", "utilisation.svg"]
    check_png(plots_run.gantt_figure(json.loads((run / "trace.json").read_text())), tmp_path, "g")


def test_plot_on_a_folder_with_nothing_to_plot(tmp_path, capsys):
    assert main(["plot", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "nothing to plot" in err and len(err.strip().splitlines()) == 1
