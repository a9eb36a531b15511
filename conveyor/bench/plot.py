"""Latency percentiles against throughput: one line per report and percentile.

Each point of a report is one concurrency (or request rate); joining them in order draws
how latency grows as load rises, and several reports on one plot compare servers,
transports or configurations. matplotlib's Agg backend: no display needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from conveyor.bench.report import Report

_STYLES = {"p50": "-", "p90": "--", "p99": ":"}


def plot_reports(reports: Sequence[Report], path: str | Path, title: str | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    try:
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for i, report in enumerate(reports):
            color = colors[i % len(colors)]
            points = [p for p in report.points if p.latency_ms.get("p50") is not None]
            xs = [p.infer_per_s for p in points]
            for key, style in _STYLES.items():
                ys = [p.latency_ms[key] for p in points]
                ax.plot(xs, ys, style, marker="o", markersize=3, color=color,
                        label=f"{report.label} {key}")
            for p in points:
                ax.annotate(p.x_label, (p.infer_per_s, p.latency_ms["p50"]), fontsize=7,
                            textcoords="offset points", xytext=(3, -9), color=color)
        ax.set_xlabel("throughput (infer/s)")
        ax.set_ylabel("latency (ms)")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(title or ", ".join(sorted({r.model for r in reports})))
        if reports:
            ax.legend(fontsize=7, ncol=2 if len(reports) > 3 else 1)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path
