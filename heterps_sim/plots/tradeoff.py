"""Trade-off figures from a sweep table (tradeoff.csv as a DataFrame); never recomputes.

    tradeoff_figure(frame)     cost vs throughput per scheduler, the Pareto front over all of
                               them, and the limits each scheduler could not meet (x marks)
    composition_figure(frame)  one scheduler's plan per limit: share of units per type
                               (stacked bars) and total units (line, right axis)
    ratios_figure(frame)       against the best single-type plan: cost ratio (left axis) and
                               the paper's "% less" (right axis); throughput at equal $/hour

Each returns a matplotlib Figure built without pyplot (no global state, no GUI backend), so
tests can count its lines and collections before it is saved. Only pandas, numpy and
matplotlib are imported here: never the schedulers, the cost model or the simulator.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure

MARKERS = "osD^vP*Xhp<>"
MAX_TYPES = 8
"""Composition figure: the types with most units get a colour each; the rest are "other"."""


def _title(meta: dict | None, what: str) -> str:
    meta = meta or {}
    bits = [meta.get("scenario") or "", f"{meta['model']} model" if meta.get("model") else "",
            f"{meta.get('mode', '')} provisioning" if meta.get("mode") else "",
            f"{meta.get('engine')} engine" if meta.get("engine") else ""]
    # the settings on a line of their own: on one line with the model named they ran past
    # the edge of the narrower figures
    return what + ("\n" + ", ".join(b for b in bits if b) if any(bits) else "")


def _feasible(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["feasible"].astype(bool) & np.isfinite(frame["cost_usd"].astype(float))]


def pareto_front(points: pd.DataFrame) -> pd.DataFrame:
    """The non-dominated (throughput up, cost down) rows, by ascending throughput."""
    ordered = points.sort_values(["throughput", "cost_usd"], ascending=[False, True])
    keep, best = [], math.inf
    for idx, cost in zip(ordered.index, ordered["cost_usd"]):
        if cost < best:
            keep.append(idx)
            best = cost
    return points.loc[keep].sort_values("throughput")


def schedulers_in(frame: pd.DataFrame) -> list[str]:
    """Scheduler names in the table's order (first appearance)."""
    return list(dict.fromkeys(frame["scheduler"]))


def tradeoff_figure(frame: pd.DataFrame, meta: dict | None = None) -> Figure:
    """Main panel: one line per scheduler with a feasible point, then the Pareto front.
    Strip below: one row of x marks per scheduler that missed a limit (the limits it missed)."""
    bad = frame[~frame["feasible"].astype(bool)]
    missed = schedulers_in(bad)
    fig = Figure(figsize=(8.0, 5.6 + 0.18 * len(missed)), dpi=100, layout="constrained")
    if missed:
        ax, strip = fig.subplots(2, 1, sharex=True, height_ratios=[8, 0.6 + 0.45 * len(missed)])
    else:
        ax, strip = fig.add_subplot(), None
    ax.set_xscale("log")
    ax.set_yscale("log")
    colours = {}
    for n, name in enumerate(schedulers_in(frame)):
        rows = _feasible(frame[frame["scheduler"] == name]).sort_values("throughput_limit")
        colours[name] = f"C{n % 10}"
        if rows.empty:
            continue
        ax.plot(rows["throughput"], rows["cost_usd"], marker=MARKERS[n % len(MARKERS)],
                markersize=4, linewidth=1.2, alpha=0.85, label=name, color=colours[name])
    ok = _feasible(frame)
    if not ok.empty:
        front = pareto_front(ok)
        ax.plot(front["throughput"], front["cost_usd"], color="black", alpha=0.22, linewidth=6,
                solid_capstyle="round", zorder=0, label="Pareto front (all schedulers)")
    ax.set_ylabel("cost of the workload (USD)")
    ax.set_title(_title(meta, "Cost vs throughput"))
    ax.grid(True, which="both", alpha=0.25)
    handles, labels = ax.get_legend_handles_labels()
    if handles:  # below the figure: inside the axes it covered the lines at the top left
        fig.legend(handles, labels, fontsize=7, loc="outside lower center",
                   ncol=min(len(handles), 4))
    if strip is None:
        ax.set_xlabel("throughput (samples/s)")
        return fig
    for n, name in enumerate(missed):
        rows = bad[bad["scheduler"] == name]
        strip.scatter(rows["throughput_limit"], np.full(len(rows), n), marker="x", s=24,
                      color=colours.get(name, "grey"))
    strip.set_yticks(range(len(missed)), missed, fontsize=7)
    strip.set_ylim(len(missed) - 0.5, -0.5)
    strip.set_title("limits not met (no plan found)", fontsize=8, loc="left")
    strip.grid(True, axis="x", which="both", alpha=0.25)
    strip.set_xlabel("throughput (samples/s); strip: the throughput limit")
    return fig


def parse_units(text) -> dict[str, int]:
    """"t4 x2, a100 x30" -> {"t4": 2, "a100": 30} (the `units` column)."""
    out: dict[str, int] = {}
    if not isinstance(text, str) or not text.strip():
        return out
    for part in text.split(", "):
        name, _, k = part.rpartition(" x")
        out[name] = out.get(name, 0) + int(k)
    return out


def _limit_label(x: float) -> str:
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.3g}"


def composition_types(units: list[dict[str, int]]) -> list[str]:
    """The MAX_TYPES types with the largest unit shares summed over limits (+ "other")."""
    share: dict[str, float] = {}
    for u in units:
        total = sum(u.values())
        for name, k in u.items():
            share[name] = share.get(name, 0.0) + k / total
    names = sorted(share, key=lambda n: (-share[n], n))
    return names[:MAX_TYPES] + (["other"] if len(names) > MAX_TYPES else [])


def composition_figure(frame: pd.DataFrame, scheduler: str | None = None,
                       meta: dict | None = None) -> Figure:
    """Stacked bars (one container per type shown) + one line of total units, per limit."""
    names = schedulers_in(frame)
    scheduler = scheduler or ("exact" if "exact" in names else names[0])
    rows = frame[frame["scheduler"] == scheduler].sort_values("index")
    units = [parse_units(u) if f else {} for u, f in zip(rows["units"], rows["feasible"])]
    types = composition_types([u for u in units if u])
    x = np.arange(len(rows))
    fig = Figure(figsize=(9.0, 5.2), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    bottom = np.zeros(len(rows))
    cmap = colormaps["tab10"]
    for t, name in enumerate(types):
        share = np.array([_type_share(u, name, types) for u in units])
        ax.bar(x, share, bottom=bottom, width=0.85, color=cmap(t % 10) if name != "other" else "0.6",
               label=name)
        bottom += share
    bad = ~rows["feasible"].astype(bool).to_numpy()
    if bad.any():
        ax.bar(x[bad], np.ones(bad.sum()), width=0.85, color="none", edgecolor="0.5", hatch="//",
               label="no plan")
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of units per type")
    step = max(1, len(rows) // 12)
    ax.set_xticks(x[::step], [_limit_label(v) for v in rows["throughput_limit"].iloc[::step]],
                  rotation=45, fontsize=8)
    ax.set_xlabel("throughput limit (samples/s)")
    right = ax.twinx()
    total = np.array([sum(u.values()) if u else np.nan for u in units], dtype=float)
    right.plot(x, total, color="black", marker="o", markersize=3, linewidth=1.2, label="total units")
    right.set_yscale("log")
    plain_log_ticks(right.yaxis, _si)  # 30, not 3 x 10^1
    right.set_ylabel("total units (log)")
    handles = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    # below the figure: inside the axes it covered the bars of the first limits
    fig.legend(handles=handles, fontsize=7, loc="outside lower center",
               ncol=min(len(handles), 6))
    ax.set_title(_title(meta, f"Plan composition per limit ({scheduler})"))
    return fig


def _type_share(units: dict[str, int], name: str, shown: list[str]) -> float:
    total = sum(units.values())
    if not total:
        return 0.0
    if name == "other":
        return sum(k for n, k in units.items() if n not in shown) / total
    return units.get(name, 0) / total


def ratio_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """Feasible rows with cost_ratio, pct_less and throughput_ratio added."""
    ok = _feasible(frame).copy()
    ok["cost_ratio"] = ok["single_type_cost_usd"].astype(float) / ok["cost_usd"].astype(float)
    ok["pct_less"] = 100.0 * (ok["cost_ratio"] - 1.0)
    same = ok["single_type_throughput_same_cost"].astype(float)
    ok["throughput_ratio"] = np.where(same > 0, ok["throughput"] / same.where(same > 0), np.inf)
    return ok


def ratios_figure(frame: pd.DataFrame, meta: dict | None = None) -> Figure:
    """Two panels, one line per scheduler with a feasible point in each."""
    ok = ratio_columns(frame)
    fig = Figure(figsize=(11.5, 4.8), dpi=100, layout="constrained")
    fig.get_layout_engine().set(wspace=0.12)  # the left panel's right-hand label stands apart
    cost_ax, speed_ax = fig.subplots(1, 2)
    for n, name in enumerate(schedulers_in(ok)):
        rows = ok[ok["scheduler"] == name].sort_values("throughput_limit")
        finite = rows[np.isfinite(rows["cost_ratio"])]
        style = dict(marker=MARKERS[n % len(MARKERS)], markersize=3.5, linewidth=1.1, alpha=0.85,
                     label=name, color=f"C{n % 10}")
        cost_ax.plot(finite["throughput_limit"], finite["cost_ratio"], **style)
        fast = rows[np.isfinite(rows["throughput_ratio"])]
        speed_ax.plot(fast["throughput_limit"], fast["throughput_ratio"], **style)
    for ax in (cost_ax, speed_ax):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.axhline(1.0, color="0.4", linewidth=0.8)
        ax.grid(True, which="both", alpha=0.25)
        ax.set_xlabel("throughput limit (samples/s)")
        plain_log_ticks(ax.xaxis, _si)
        plain_log_ticks(ax.yaxis, lambda v: f"{v:g}x")
    cost_ax.set_ylabel("best single-type plan's cost / this plan's (x)")
    no_single = frame.loc[~np.isfinite(frame["single_type_cost_usd"].astype(float)),
                          "throughput_limit"]
    if len(no_single):
        cost_ax.axvspan(no_single.min(), frame["throughput_limit"].max(), color="0.85", zorder=0,
                        label="no single-type plan")
    _pct_less_axis(cost_ax)
    cost_ax.set_title("Cost vs the best single-type plan (same limit)", fontsize=10)
    speed_ax.set_ylabel("throughput / best single type's at equal $/hour (x)")
    speed_ax.set_title("Throughput at equal budget", fontsize=10)
    handles, labels = cost_ax.get_legend_handles_labels()
    if handles:  # below both panels: it covers no line of either
        fig.legend(handles, labels, fontsize=7, loc="outside lower center",
                   ncol=min(len(handles), 6))
    fig.suptitle(_title(meta, "Against the best single-type plan"), fontsize=11)
    return fig


def _si(v: float) -> str:
    """200k, 1.5M, 30: a throughput tick without exponents."""
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:g}{unit}"
    return f"{v:g}"


def plain_log_ticks(axis, label) -> None:
    """A log axis labelled in plain numbers: every decade, and the 2x and 5x ticks between
    (the 3x, 4x, ... ticks stay, unlabelled: labelled, they ran into each other)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    axis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: label(v)))
    axis.set_minor_locator(LogLocator(base=10.0, subs=(3.0, 4.0, 6.0, 7.0, 8.0, 9.0)))
    axis.set_minor_formatter(NullFormatter())


PCT_TICKS = (0.01, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 10.0, 30.0, 100.0)


def _pct_less_axis(ax) -> None:
    """A right-hand axis over the same (log) ratio scale, labelled in the paper's "% less" (a
    secondary axis: the layout makes room for its label, so the next panel's cannot collide)."""
    lo, hi = ax.get_ylim()
    right = ax.secondary_yaxis("right", functions=(lambda x: x, lambda x: x))
    ticks = [t for t in PCT_TICKS if lo <= t <= hi]
    right.set_yticks(ticks, [f"{100.0 * (t - 1.0):+.0f}%" for t in ticks])
    right.minorticks_off()
    right.set_ylabel('"% less cost" (paper\'s form) = 100 (x - 1)')
