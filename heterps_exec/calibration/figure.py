"""The validation figure: predicted vs measured throughput, one point per plan and predictor,
the y = x line, and +-5% / +-20% bands. Reads only the report dict (never recomputes)."""

from __future__ import annotations

from pathlib import Path


def scatter(report: dict, path: str | Path):
    """Draw and save the scatter; returns the matplotlib Figure (tests inspect it)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plans = report["plans"]
    measured = [r["measured"] for r in plans]
    fig, ax = plt.subplots(figsize=(5.5, 5.6), dpi=110, layout="constrained")
    for key, label, marker in (("des", f"simulator (MAPE {report['mape_des']:.1f}%)", "o"),
                               ("analytic", f"analytic (MAPE {report['mape_analytic']:.1f}%)",
                                "s")):
        ax.scatter(measured, [r[key] for r in plans], label=label, marker=marker, alpha=0.8)
    values = measured + [r["des"] for r in plans] + [r["analytic"] for r in plans]
    lo, hi = min(values) * 0.8, max(values) * 1.2
    ax.plot([lo, hi], [lo, hi], color="black", lw=1, label="predicted = measured")
    for band, style in ((0.05, ":"), (0.2, "--")):
        ax.plot([lo, hi], [lo * (1 + band), hi * (1 + band)], color="grey", ls=style, lw=0.8,
                label=f"\u00b1{band:.0%}")
        ax.plot([lo, hi], [lo * (1 - band), hi * (1 - band)], color="grey", ls=style, lw=0.8)
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi),
           xlabel="measured throughput (samples/s)", ylabel="predicted throughput (samples/s)",
           title=f"{report['num_plans']} plans: predicted vs measured")
    fig.legend(loc="outside lower center", fontsize=8, ncol=2)  # below: it covers no point
    from heterps_sim.core.outputs import save_figure
    save_figure(fig, path)  # atomic: never a torn PNG
    plt.close(fig)
    return fig
