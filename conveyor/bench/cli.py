"""``conveyor bench``: measure a model through a target, print a table, write JSON and a plot.

conveyor bench MODEL [--url inprocess|http://H:P|grpc://H:P] [--concurrency 1,4,16 |
                      --request-rate 100,500] [options]
conveyor bench plot REPORT.json [REPORT.json ...] -o OUT.png
conveyor bench ceiling          (the generator's own ceiling against canned servers)
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from collections.abc import Sequence

from conveyor.bench.report import format_table, read_json, write_json
from conveyor.bench.runner import BenchSpec
from conveyor.bench.sweep import Sweep
from conveyor.bench.targets.base import RequestFailed, TargetSpec
from conveyor.errors import ConveyorError
from conveyor.options import add_arguments, from_arguments, option


@dataclasses.dataclass(frozen=True)
class Output:
    """Where a run's results go besides the table on stdout."""

    json_path: str | None = dataclasses.field(
        default=None,
        metadata=option("write the report as JSON", flags=("--json",), metavar="REPORT.json"),
    )
    plot_path: str | None = dataclasses.field(
        default=None,
        metadata=option(
            "draw latency against throughput (needs matplotlib: pip install '.[bench]')",
            flags=("--plot",),
            metavar="REPORT.png",
        ),
    )
    quiet: bool = dataclasses.field(
        default=False, metadata=option("no progress on stderr", flags=("-q", "--quiet"))
    )


# Every option is a field of one of these dataclasses; --help groups them under these titles.
OPTION_SOURCES = (
    (TargetSpec, "target"),
    (Sweep, "load (one measured point per concurrency or rate)"),
    (BenchSpec, "requests and generators"),
    (Output, "output"),
)


# The subcommands' usage lines, as ``conveyor bench --help`` shows them under the run form's.
SUBCOMMAND_USAGE = (
    "conveyor bench plot REPORT.json [REPORT.json ...] -o OUT.png [--title TITLE]",
    "conveyor bench ceiling [options]",
)


def run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="conveyor bench",
        description="Load-test one model of a V2 server (Conveyor, Triton, MLServer) or of the "
        "in-process engine. Two subcommands: plot draws written reports side by side; ceiling "
        "measures the load generator's own ceiling against canned servers (each has --help).",
    )
    for source, title in OPTION_SOURCES:
        add_arguments(p.add_argument_group(title), source)
    # The usage argparse writes covers the run form only; the subcommands are dispatched
    # before this parser, so their lines are added to it by hand.
    generated = p.format_usage().removeprefix("usage: ").rstrip("\n").replace("%", "%%")
    p.usage = "\n       ".join((generated, *SUBCOMMAND_USAGE))
    return p


def _run(argv: Sequence[str]) -> int:
    from conveyor.bench.runner import run_bench

    parser = run_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "model"):
        parser.error("the model name is required: conveyor bench MODEL [options]")
    try:
        target = from_arguments(args, TargetSpec)
        sweep = from_arguments(args, Sweep)
        bench = from_arguments(args, BenchSpec, target=target)
        output = from_arguments(args, Output)
    except ValueError as exc:
        print(f"conveyor bench: {exc}", file=sys.stderr)
        return 2
    if output.plot_path and not _can_plot():
        return 2
    try:
        report = run_bench(
            bench,
            sweep.points(bench.seed),
            progress=not output.quiet,
            command="conveyor bench " + shlex.join(argv),
        )
    except (ValueError, OSError, RequestFailed, ConveyorError) as exc:
        print(f"conveyor bench: {exc}", file=sys.stderr)
        return 1
    print(format_table(report))
    if output.json_path:
        write_json(report, output.json_path)
    if output.plot_path:
        from conveyor.bench.plot import plot_reports

        plot_reports([report], output.plot_path)
    return 0 if all(p.errors == 0 for p in report.points) else 1


def _can_plot() -> bool:
    """Whether matplotlib is there; says what to install when not (before a long run)."""
    from conveyor.bench.plot import PlotUnavailable, _pyplot

    try:
        _pyplot()
    except PlotUnavailable as exc:
        print(f"conveyor bench: {exc}", file=sys.stderr)
        return False
    return True


def _plot(argv: Sequence[str]) -> int:
    from conveyor.bench.plot import plot_reports

    p = argparse.ArgumentParser(
        prog="conveyor bench plot", description="Draw several reports on one plot."
    )
    p.add_argument("reports", nargs="+", metavar="REPORT.json")
    p.add_argument("-o", "--output", required=True, metavar="OUT.png")
    p.add_argument("--title")
    args = p.parse_args(argv)  # first: --help answers without matplotlib
    if not _can_plot():
        return 2
    plot_reports([read_json(path) for path in args.reports], args.output, args.title)
    print(args.output)
    return 0


def _ceiling(argv: Sequence[str]) -> int:
    from conveyor.bench.ceiling import main as ceiling_main

    return ceiling_main(argv)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["plot"]:
        return _plot(argv[1:])
    if argv[:1] == ["ceiling"]:
        return _ceiling(argv[1:])
    return _run(argv)
