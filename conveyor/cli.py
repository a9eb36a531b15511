"""The ``conveyor`` command: ``serve`` runs the server; ``models`` lists a repository;
``bench`` load-tests a model."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

# What ``conveyor --help`` prints (plain text: argparse shows it verbatim, so no markup).
DESCRIPTION = "Conveyor: a KServe V2 / Open Inference Protocol inference server (HTTP and gRPC)."
EPILOG = """\
commands:
  conveyor serve [REPOSITORY]   serve a model repository over HTTP/REST and gRPC, with metrics
  conveyor models [REPOSITORY]  load a repository, list its models (--run: run each once)
  conveyor bench MODEL          load-test a model in-process or over http:// or grpc://
  conveyor ray deploy REPOSITORY  the repository on a Ray cluster (Ray Serve), same V2 HTTP
  conveyor ray status           the Ray Serve deployments' states and replicas

With no REPOSITORY, the built-in example models. A repository is laid out as
<repository>/<model>/<version>/model.onnx (or model.py) with <model>/config.toml beside.
--log-level may come before or after the command. "conveyor COMMAND --help" for its options;
"conveyor --version" for the version.
"""
LOG_LEVEL_HELP = "debug, info, warning, error (default: info for serve, else warning)"


def _models(args: argparse.Namespace) -> int:
    """Load every model of the repository, run each once, and print what it serves.

    Exits 1 when any model is not READY (e.g. it failed to load), so a script or CI step
    can check a repository with it.
    """
    import numpy as np

    from conveyor.engine import Engine, ModelState
    from conveyor.errors import ConveyorError

    try:
        engine = Engine.from_repository(args.repository)
    except ConveyorError as exc:
        print(f"conveyor models: {exc.message}", file=sys.stderr)
        return 2
    unavailable: list[str] = []
    with engine:
        for entry in engine.repository_index():
            if entry.state != "READY":
                unavailable.append(entry.name)
            print(
                f"{entry.name:<16} {entry.state:<12} version {entry.version or '-':<4} "
                f"{entry.reason}"
            )
            if entry.state is not ModelState.READY:
                continue
            info = engine.model(entry.name, entry.version)
            for spec in info.config.inputs:
                shape = [-1, *spec.shape] if info.config.batching else list(spec.shape)
                print(f"    input  {spec.name:<12} {spec.datatype:<6} {shape}")
            for spec in info.config.outputs:
                shape = [-1, *spec.shape] if info.config.batching else list(spec.shape)
                print(f"    output {spec.name:<12} {spec.datatype:<6} {shape}")
            if args.run:
                inputs = {
                    spec.name: _example_input(spec, info.config.batching, np)
                    for spec in info.config.inputs
                }
                if info.config.decoupled:  # many responses: show how many, and the last
                    responses = list(engine.stream(entry.name, inputs))
                    print(f"    ran:   {len(responses)} responses")
                    outputs = responses[-1] if responses else {}
                else:
                    outputs = engine.submit(entry.name, inputs).result(timeout=30)
                for name, value in outputs.items():
                    print(f"    ran:   {name} = {np.array2string(value.ravel()[:4])}...")
    if unavailable:
        names = ", ".join(dict.fromkeys(unavailable))
        print(f"conveyor models: not every model is available: {names}", file=sys.stderr)
        return 1
    return 0


def _bench(args: argparse.Namespace) -> int:
    from conveyor.bench.cli import main as bench_main

    return bench_main(args.args)


def _example_input(spec, batching, np):
    from conveyor.protocol.datatypes import BYTES, numpy_dtype

    shape = [1 if d == -1 else d for d in spec.shape]
    if batching:
        shape = [1, *shape]
    if spec.datatype == BYTES:
        return np.full(shape, b"conveyor", dtype=object)
    return np.ones(shape, dtype=numpy_dtype(spec.datatype))


def _serve(args: argparse.Namespace) -> int:
    """Serve a repository over HTTP (and metrics) until SIGTERM/SIGINT; exit 0 after draining."""
    from conveyor.server.server import Server
    from conveyor.server.settings import from_arguments

    try:
        settings = from_arguments(args).with_environment(os.environ)
        if args.log_level:  # the flag every command shares, as the logging settings' start
            settings = settings.with_log_level(args.log_level)
    except ValueError as exc:
        print(f"conveyor serve: {exc}", file=sys.stderr)
        return 2
    if args.own_command_line:
        # Parsed: from here on the process's arguments are the program's name alone, as the
        # models of Triton's Python stub see them. Triton's QA models call unittest.main()
        # in execute, which would read the server's flags as names of tests.
        del sys.argv[1:]
    return Server(settings).run()


def build_parser() -> argparse.ArgumentParser:
    from conveyor.server.settings import add_arguments

    parser = argparse.ArgumentParser(
        prog="conveyor",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--log-level", help=LOG_LEVEL_HELP)
    parser.add_argument(
        "--version", action=_PrintVersion, help="print the version (conveyor X.Y.Z) and exit"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve", help="serve a model repository over KServe V2 HTTP/REST and gRPC, with metrics"
    )
    add_arguments(serve)
    _add_log_level(serve)
    serve.set_defaults(handler=_serve, default_log_level="info")
    models = commands.add_parser("models", help="load a repository and list its models")
    models.add_argument(
        "repository", nargs="?", help="model repository (default: built-in examples)"
    )
    models.add_argument("--run", action="store_true", help="run each model once on example input")
    _add_log_level(models)
    models.set_defaults(handler=_models, default_log_level="warning")
    # ``conveyor bench`` has its own parser (and its own subcommands: plot, ceiling), so
    # every argument after ``bench``, --help included, is handed to it untouched.
    bench = commands.add_parser(
        "bench",
        help="load-test a model (inprocess, http://, grpc://)",
        add_help=False,
        prefix_chars="\0",
    )
    bench.add_argument("args", nargs=argparse.REMAINDER)
    bench.set_defaults(handler=_bench, default_log_level="warning")
    from conveyor.ray.cli import add_parser as add_ray_parser

    add_ray_parser(commands)
    return parser


class _PrintVersion(argparse.Action):
    """``--version``: argparse's own version action wants the text when the parser is built,
    and reading the package metadata then would slow every command's start."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from conveyor._version import package_version

        print(f"conveyor {package_version()}")
        parser.exit()


def _add_log_level(command: argparse.ArgumentParser) -> None:
    # SUPPRESS: given after the command it sets the value; absent, it leaves the one given
    # before the command (argparse would otherwise overwrite that with this default).
    command.add_argument("--log-level", default=argparse.SUPPRESS, help=LOG_LEVEL_HELP)


def _take_log_level(args: list[str]) -> tuple[list[str], str | None]:
    """``bench``'s arguments without --log-level (its own parser does not know it)."""
    rest: list[str] = []
    level = None
    items = iter(args)
    for item in items:
        if item == "--log-level":
            level = next(items, None)
        elif item.startswith("--log-level="):
            level = item.partition("=")[2]
        else:
            rest.append(item)
    return rest, level


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.own_command_line = argv is None  # sys.argv was parsed
    if args.command == "bench":
        args.args, level = _take_log_level(args.args)
        args.log_level = level or args.log_level
    level = (args.log_level or args.default_log_level).upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        print(f"conveyor: --log-level must be one of {LOG_LEVEL_HELP}", file=sys.stderr)
        return 2
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
