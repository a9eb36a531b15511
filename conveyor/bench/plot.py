"""Latency percentiles against throughput: one line per report and percentile.

Each point of a report is one concurrency (or request rate); joining them in order draws
how latency grows as load rises, and several reports on one plot compare servers,
transports or configurations. Colour says which report, line style which percentile; the
legend shows the two apart, so a style is never hidden under a marker. matplotlib's Agg
backend: no display needed. matplotlib is the ``bench`` extra: ``pip install
'.[bench]'`` from a checkout of Conveyor.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from conveyor.bench.report import Report

STYLES: dict[str, Literal["-", "--", ":"]] = {"p50": "-", "p90": "--", "p99": ":"}
INSTALL_HINT = "plots need matplotlib: pip install '.[bench]' from a checkout of Conveyor"


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise PlotUnavailable(INSTALL_HINT) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def ms_label(value: float, _position: object = None) -> str:
    """A tick in plain milliseconds: 0.5, 1, 2, 20, 1000 (not 2x10^0)."""
    return f"{value:.10g}"


def _span(values: Sequence[float], unit: str) -> str:
    low, high = min(values), max(values)
    return f"{low:g}{unit}" if low == high else f"{low:g}-{high:g}{unit}"


def default_title(reports: Sequence[Report]) -> str:
    """Model, protocol and the concurrency or rate range: "mlp via grpc, concurrency 1-16"."""
    models = ", ".join(sorted({r.model for r in reports}))
    transports = ", ".join(sorted({r.transport for r in reports}))
    points = [p for r in reports for p in r.points]
    loads = []
    concurrency = [p.concurrency for p in points if p.concurrency is not None]
    rates = [p.request_rate for p in points if p.request_rate is not None]
    if concurrency:
        loads.append("concurrency " + _span(concurrency, ""))
    if rates:
        loads.append("rate " + _span(rates, " req/s"))
    return ", ".join([f"{models} via {transports}", *loads])


def draw(reports: Sequence[Report], title: str | None = None) -> Any:
    """The figure (the caller closes it): latency percentiles against infer/s."""
    plt = _pyplot()
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    handles = []
    for i, report in enumerate(reports):
        color = colors[i % len(colors)]
        points = [p for p in report.points if p.latency_ms.get("p50") is not None]
        xs = [p.infer_per_s for p in points]
        for key, style in STYLES.items():
            ax.plot(
                xs,
                [p.latency_ms[key] for p in points],
                style,
                marker="o",
                markersize=3,
                color=color,
            )
        for p in points:
            ax.annotate(
                p.x_label,
                (p.infer_per_s, p.latency_ms["p50"]),
                fontsize=7,
                textcoords="offset points",
                xytext=(3, -9),
                color=color,
            )
        handles.append(Line2D([], [], color=color, marker="o", markersize=3, label=report.label))
    # The percentiles' styles, without markers, so a dashed line looks dashed.
    handles += [
        Line2D([], [], color="0.35", linestyle=style, label=key) for key, style in STYLES.items()
    ]
    ax.set_xlabel("throughput (infer/s)")
    ax.set_ylabel("latency (ms)")
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(ms_label))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title or default_title(reports))
    ax.legend(handles=handles, fontsize=7, handlelength=3, ncol=2 if len(reports) > 3 else 1)
    fig.tight_layout()
    return fig


def plot_reports(reports: Sequence[Report], path: str | Path, title: str | None = None) -> Path:
    """Draw ``reports`` on one plot and write it to ``path`` (PNG, or what the suffix says)."""
    plt = _pyplot()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = draw(reports, title)
    try:
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path
