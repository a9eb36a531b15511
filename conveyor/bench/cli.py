"""``conveyor bench``: measure a model through a target, print a table, write JSON and a plot.

    conveyor bench MODEL [--url inprocess|http://H:P|grpc://H:P] [--concurrency 1,4,16 |
                          --request-rate 100,500] [options]
    conveyor bench plot REPORT.json [REPORT.json ...] -o OUT.png
    conveyor bench ceiling          (the generator's own ceiling against canned servers)
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence

from conveyor.bench.inputs import INPUT_DATA, parse_shapes
from conveyor.bench.loadgen import Point
from conveyor.bench.report import format_table, read_json, write_json
from conveyor.bench.schedule import DISTRIBUTIONS
from conveyor.bench.targets.base import ENCODINGS, RequestFailed, TargetSpec
from conveyor.errors import ConveyorError


def _numbers(kind):
    def parse(text: str) -> list:
        try:
            values = [kind(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"want a comma-separated list, got {text!r}"
            ) from None
        if not values or any(v <= 0 for v in values):
            raise argparse.ArgumentTypeError(f"want positive numbers, got {text!r}")
        return values

    return parse


def run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="conveyor bench",
        description="Load-test one model of a V2 server (Conveyor, Triton, MLServer) or of the "
        "in-process engine. Subcommands: `conveyor bench plot A.json B.json -o out.png`, "
        "`conveyor bench ceiling`.",
    )
    p.add_argument("model", help="model name")
    p.add_argument("--url", default="http://127.0.0.1:8000",
                   help="inprocess, http://HOST:PORT or grpc://HOST:PORT (default %(default)s)")
    p.add_argument("--model-version", default="", help="default: the server's choice")
    load = p.add_mutually_exclusive_group()
    load.add_argument("-c", "--concurrency", type=_numbers(int),
                      help="closed loop: requests in flight, e.g. 1,4,16 (default 1)")
    load.add_argument("-r", "--request-rate", type=_numbers(float),
                      help="open loop: requests per second, e.g. 100,500,1000")
    p.add_argument("--distribution", choices=DISTRIBUTIONS, default="constant",
                   help="open-loop schedule (default %(default)s)")
    p.add_argument("-d", "--duration", type=float, default=5.0,
                   help="measured seconds per point (default %(default)s)")
    p.add_argument("--warmup", type=float, default=1.0,
                   help="unmeasured seconds before each point (default %(default)s)")
    p.add_argument("-b", "--batch-size", type=int, default=1)
    p.add_argument("--shape", action="append", default=[], metavar="NAME:D1,D2",
                   help="an input's shape (without the batch dimension when the model batches)")
    p.add_argument("--input-data", default="random",
                   help=f"{' | '.join(INPUT_DATA)} | FILE.npz (arrays named by input)")
    p.add_argument("--encoding", choices=ENCODINGS, default="binary",
                   help="HTTP tensors: the binary extension or plain JSON (default %(default)s)")
    p.add_argument("--streaming", action="store_true",
                   help="gRPC: send every request on one ModelStreamInfer stream per process")
    p.add_argument("-p", "--processes", type=int, default=1,
                   help="generator worker processes (default %(default)s)")
    p.add_argument("--max-inflight", type=int, default=1024,
                   help="open loop: requests in flight per process at most (default %(default)s)")
    p.add_argument("--repository", help="inprocess: model repository (default built-in examples)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--label", default="", help="name of this run in the table and plots")
    p.add_argument("--json", dest="json_path", metavar="REPORT.json")
    p.add_argument("--plot", dest="plot_path", metavar="REPORT.png")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    return p


def _run(argv: Sequence[str]) -> int:
    from conveyor.bench.runner import BenchSpec, run_bench

    args = run_parser().parse_args(argv)
    target = TargetSpec(url=args.url, model=args.model, version=args.model_version,
                        encoding=args.encoding, repository=args.repository,
                        streaming=args.streaming)
    try:
        if target.scheme != "grpc" and args.streaming:  # .scheme validates the URL
            raise ValueError("--streaming is for grpc:// targets")
        shapes = parse_shapes(args.shape)
    except ValueError as exc:
        print(f"conveyor bench: {exc}", file=sys.stderr)
        return 2
    common = dict(warmup_s=args.warmup, duration_s=args.duration, seed=args.seed,
                  max_inflight=args.max_inflight)
    if args.request_rate:
        points = [Point(rate=r, distribution=args.distribution, **common)
                  for r in args.request_rate]
    else:
        points = [Point(concurrency=c, **common) for c in (args.concurrency or [1])]
    bench = BenchSpec(target=target, batch_size=args.batch_size, shapes=shapes,
                      input_data=args.input_data, processes=args.processes, seed=args.seed,
                      label=args.label)
    try:
        report = run_bench(bench, points, progress=not args.quiet,
                           command="conveyor bench " + shlex.join(argv))
    except (ValueError, OSError, RequestFailed, ConveyorError) as exc:
        print(f"conveyor bench: {exc}", file=sys.stderr)
        return 1
    print(format_table(report))
    if args.json_path:
        write_json(report, args.json_path)
    if args.plot_path:
        from conveyor.bench.plot import plot_reports

        plot_reports([report], args.plot_path)
    return 0 if all(p.errors == 0 for p in report.points) else 1


def _plot(argv: Sequence[str]) -> int:
    from conveyor.bench.plot import plot_reports

    p = argparse.ArgumentParser(prog="conveyor bench plot",
                                description="Draw several reports on one plot.")
    p.add_argument("reports", nargs="+", metavar="REPORT.json")
    p.add_argument("-o", "--output", required=True, metavar="OUT.png")
    p.add_argument("--title")
    args = p.parse_args(argv)
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
