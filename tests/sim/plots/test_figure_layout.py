"""Figures are laid out to be read, checked with matplotlib's own renderer: the two panels of
ratios.png keep their labels apart, legends cover no bar, line or point (they sit outside the
axes), and the run timeline draws every track of the trace, saying which share a row."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

from heterps_sim.core.trace import Span, chrome_trace  # noqa: E402
from heterps_sim.plots import run as plots_run  # noqa: E402
from heterps_sim.plots import tradeoff as plots  # noqa: E402
from tests.sim.plots.test_plots import small_sweep  # noqa: E402


def _renderer(fig):
    canvas = FigureCanvasAgg(fig)
    canvas.draw()  # the constrained layout runs here, as when the PNG is saved
    return canvas.get_renderer()


def _drawn_ticklabels(axis) -> list:
    """The tick labels matplotlib draws: those of ticks inside the view limits."""
    lo, hi = sorted(axis.get_view_interval())
    out = []
    for ticks, locs in ((axis.get_major_ticks(), axis.get_majorticklocs()),
                        (axis.get_minor_ticks(), axis.get_minorticklocs())):
        out += [t.label1 for t, loc in zip(ticks, locs, strict=False)
                if lo <= loc <= hi and t.label1.get_visible() and t.label1.get_text()]
    return out


def _texts(ax, renderer) -> list[tuple[str, Bbox]]:
    """Every drawn text of an axes and its child axes (the "% less" axis): axis labels and
    tick labels, with their boxes in pixels."""
    found = []
    for a in [ax, *ax.child_axes]:
        for axis in (a.xaxis, a.yaxis):
            items = [axis.label, *_drawn_ticklabels(axis)]
            found += [(t.get_text(), t.get_window_extent(renderer)) for t in items
                      if t.get_visible() and t.get_text()]
    return found


def _legends(fig) -> list:
    return [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]


def test_ratios_panels_labels_do_not_collide():
    fig = plots.ratios_figure(small_sweep(), {"scenario": "s", "mode": "exact"})
    r = _renderer(fig)
    cost_ax, speed_ax = fig.axes
    left, right = _texts(cost_ax, r), _texts(speed_ax, r)
    assert any("% less" in t for t, _ in left) and any("equal $/hour" in t for t, _ in right)
    for a, box_a in left:
        for b, box_b in right:
            assert not box_a.overlaps(box_b), f"{a!r} collides with {b!r}"
    # and within each panel, no two tick labels of one axis run into each other
    for ax in (cost_ax, speed_ax):
        labels = [t.get_window_extent(r) for t in _drawn_ticklabels(ax.xaxis)]
        assert len(labels) >= 2
        assert all(not p.overlaps(q) for i, p in enumerate(labels) for q in labels[i + 1:])
    # the legend below both panels covers neither
    (legend,) = _legends(fig)
    box = legend.get_window_extent(r)
    assert not any(box.overlaps(ax.get_window_extent(r)) for ax in (cost_ax, speed_ax))


def test_utilisation_legend_covers_no_bar():
    # the bottleneck is the last stage, at utilisation 1.0: where "upper right" put the legend
    stages = [{"resource": "t4", "num_replicas": 2, "utilisation": u, "comm_share": c,
               "bubble": b} for u, c, b in ((0.5, 0.9, 0.1), (0.7, 0.95, 0.3), (1.0, 1.0, 0.2))]
    fig = plots_run.utilisation_figure({"source": "des", "throughput": 1e6,
                                        "bottleneck_stage": 2, "stages": stages})
    r = _renderer(fig)
    (legend,) = _legends(fig)
    box = legend.get_window_extent(r)
    bars = [p.get_window_extent(r) for c in fig.axes[0].containers for p in c]
    assert len(bars) == 9
    assert not any(box.overlaps(b) for b in bars)
    assert not box.overlaps(fig.axes[0].get_window_extent(r))


def _trace(replicas: list[int], ps_shards: int = 0) -> dict:
    spans = []
    for g, k in enumerate(replicas):
        for r in range(k):
            track = f"stage {g} / replica {r} (t4)"
            spans += [Span(group="stages", track=track, name=f"F{mb}", category="compute",
                           start_s=1e-3 * (mb + g), end_s=1e-3 * (mb + g) + 5e-4)
                      for mb in range(2)]
    spans += [Span(group="ps", track=f"ps shard {s}", name="pull", category="ps",
                   start_s=0.0, end_s=1e-3) for s in range(ps_shards)]
    return chrome_trace(spans)


def test_timeline_draws_every_track_and_says_which_share_a_row():
    trace = _trace([24, 20, 12], ps_shards=2)  # 56 tracks, as in the report that found it
    rows, _ = plots_run.trace_rows(trace)
    assert len(rows) == 58
    fig = plots_run.gantt_figure(trace, "big")
    ax = fig.axes[0]
    shown = [t.get_text() for t in ax.get_yticklabels()]
    assert len(shown) <= plots_run.MAX_ROWS
    # every track of the input is on a row of its own or inside a "replicas a-b (n)" row
    covered = set()
    for label in shown:
        m = plots_run.STAGE_ROW.match(label)
        if label.startswith("stage ") and " / replicas " in label:
            g = int(label.split()[1])
            span = label.split(" / replicas ")[1].split(" ")[0]
            a, b = (int(x) for x in span.split("-"))
            n = int(label.rsplit("(", 1)[1].rstrip(")"))
            assert n == b - a + 1
            covered |= {f"stage {g} / replica {r} (t4)" for r in range(a, b + 1)}
        else:
            assert m or label.startswith("ps shard"), label
            covered.add(label)
    assert covered == set(rows)
    # every span is drawn (one bar each), and the title says what was merged
    bars = sum(len(c.get_paths()) for c in ax.collections)
    assert bars == sum(e["ph"] == "X" for e in trace["traceEvents"])
    merged = len(rows) - sum(1 for x in shown if " / replicas " not in x)
    assert f"{merged} of {len(rows)} tracks drawn on" in ax.get_title()
    r = _renderer(fig)
    (legend,) = _legends(fig)
    assert not legend.get_window_extent(r).overlaps(ax.get_window_extent(r))


def test_a_small_timeline_merges_nothing_and_says_nothing():
    trace = _trace([3, 2])
    fig = plots_run.gantt_figure(trace, "small")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == plots_run.trace_rows(trace)[0]
    assert ax.get_title() == "small"


def test_validation_scatter_legend_covers_no_point(tmp_path):
    from heterps_exec.calibration.figure import scatter
    plans = [{"measured": m, "des": m * f, "analytic": m * g}
             for m, f, g in ((1e3, 1.9, 1.1), (2e3, 1.0, 0.9), (5e3, 1.3, 0.7), (1e4, 1.02, 1.2))]
    fig = scatter({"plans": plans, "num_plans": 4, "mape_des": 30.0, "mape_analytic": 17.0},
                  tmp_path / "scatter.png")
    r = _renderer(fig)
    (legend,) = _legends(fig)
    box = legend.get_window_extent(r)
    ax = fig.axes[0]
    points = [xy for c in ax.collections for xy in c.get_offset_transform().transform(
        c.get_offsets())]
    assert len(points) == 8
    assert not any(box.contains(x, y) for x, y in points)
    assert not box.overlaps(ax.get_window_extent(r))
    assert (tmp_path / "scatter.png").stat().st_size > 1000


def test_tradeoff_legend_covers_no_line_or_mark():
    sweep = small_sweep()
    for frame in (sweep, sweep[sweep["feasible"]]):  # with the "limits not met" strip, without
        fig = plots.tradeoff_figure(frame, {"scenario": "s", "mode": "exact"})
        r = _renderer(fig)
        (legend,) = _legends(fig)
        labels = [t.get_text() for t in legend.get_texts()]
        assert labels == ["a", "b", "Pareto front (all schedulers)"]
        box = legend.get_window_extent(r)
        assert not any(box.overlaps(ax.get_window_extent(r)) for ax in fig.axes)
        ax = fig.axes[0]
        points = [xy for ln in ax.get_lines() for xy in ln.get_transform().transform(ln.get_xydata())]
        assert len(points) == 5 + 3 + 5  # a, b and the front
        assert not any(box.contains(x, y) for x, y in points)


def _many_types_sweep(types: int, limits: int = 9):
    """One scheduler, `limits` limits, up to `types` types per plan (more than MAX_TYPES: an
    "other" bar), the top two limits missed."""
    import pandas as pd
    rows = []
    for i in range(limits):
        feasible = i < limits - 2
        units = ", ".join(f"type{t} x{1 + (i + t) % 4}" for t in range(min(types, 2 + 2 * i)))
        rows.append({"index": i, "scheduler": "exact", "throughput_limit": 1e5 * 2 ** i,
                     "feasible": feasible, "units": units if feasible else ""})
    return pd.DataFrame(rows)


def test_composition_legend_covers_no_bar_or_axes():
    for types in (2, 5, plots.MAX_TYPES + 3):
        fig = plots.composition_figure(_many_types_sweep(types), meta={"scenario": "s"})
        r = _renderer(fig)
        (legend,) = _legends(fig)
        labels = [t.get_text() for t in legend.get_texts()]
        shown = min(types, plots.MAX_TYPES) + (types > plots.MAX_TYPES)
        assert len(labels) == shown + 2 and labels[-2:] == ["no plan", "total units"]
        box = legend.get_window_extent(r)
        ax, right = fig.axes
        assert not any(box.overlaps(a.get_window_extent(r)) for a in (ax, right))
        bars = [p.get_window_extent(r) for c in ax.containers for p in c]
        assert len(bars) == 9 * shown + 2  # every type at every limit, the two missed limits
        assert not any(box.overlaps(b) for b in bars)
        # and the figure still holds the legend (not pushed off the canvas)
        assert fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1, box.y1)


def test_titles_stay_inside_the_figure():
    """With every setting named (the report's sweeps), no figure's title runs past its edge."""
    meta = {"scenario": "2emb-ps-contention", "model": "default", "mode": "exact",
            "engine": "analytic"}
    for fig in (plots.tradeoff_figure(small_sweep(), meta),
                plots.composition_figure(small_sweep(), meta=meta),
                plots.ratios_figure(small_sweep(), meta)):
        r = _renderer(fig)
        titles = [ax.title for ax in fig.axes if ax.get_title()] + \
            ([fig._suptitle] if fig._suptitle is not None else [])
        assert any("default model" in t.get_text() for t in titles)
        for t in titles:
            box = t.get_window_extent(r)
            assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1, t.get_text()
