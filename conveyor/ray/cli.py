"""``conveyor ray deploy`` and ``conveyor ray status``.

Ray is imported only when a command runs, so ``conveyor --help`` works without it and a
missing Ray Serve is one clear message (what to install), exit status 2.
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

from conveyor.errors import ConveyorError
from conveyor.ray import APP_NAME, build_app, require_ray_serve

ADDRESS_HELP = (
    'the Ray cluster: "auto" (default: RAY_ADDRESS, or the cluster `ray start` runs on this '
    'machine), ray://HOST:10001, or "local" (a one-machine cluster for as long as the command '
    "runs; implies --wait)"
)


def add_parser(commands: Any) -> None:
    """The ``ray`` command and its subcommands, under ``conveyor``'s parser."""
    ray = commands.add_parser("ray", help="deploy a model repository on a Ray cluster (Ray Serve)")
    sub = ray.add_subparsers(dest="ray_command", required=True)
    deploy = sub.add_parser(
        "deploy", help="deploy the repository as Ray Serve deployments behind V2 HTTP"
    )
    deploy.add_argument("repository", help="model repository (readable on every node)")
    deploy.add_argument("--address", default="auto", help=ADDRESS_HELP)
    deploy.add_argument(
        "--http-host", default="127.0.0.1", help="Ray Serve's HTTP host (default 127.0.0.1)"
    )
    deploy.add_argument(
        "--http-port", type=int, default=8000, help="Ray Serve's HTTP port (default 8000)"
    )
    deploy.add_argument(
        "--wait", action="store_true", help="stay until interrupted, then tear the app down"
    )
    deploy.set_defaults(handler=_deploy, default_log_level="warning")
    status = sub.add_parser("status", help="the deployed models' replicas and states")
    status.add_argument("--address", default="auto", help=ADDRESS_HELP)
    status.set_defaults(handler=_status, default_log_level="warning")


def _connect(address: str) -> None:
    import ray

    ray.init(address=address, include_dashboard=False, log_to_driver=False)


def _deploy(args: argparse.Namespace) -> int:
    try:
        require_ray_serve()
        application = build_app(args.repository)
    except ConveyorError as exc:
        print(f"conveyor ray deploy: {exc.message}", file=sys.stderr)
        return 2
    from ray import serve

    _connect(args.address)
    # HTTP options take effect when Serve first starts on the cluster; later deploys reuse it.
    serve.start(http_options={"host": args.http_host, "port": args.http_port})
    serve.run(application, name=APP_NAME, route_prefix="/")
    print(
        f"conveyor ray deploy: serving {args.repository} at http://{args.http_host}:"
        f"{args.http_port} (Ray Serve application {APP_NAME!r})"
    )
    if args.wait or args.address == "local":
        stop = {signal.SIGINT, signal.SIGTERM}
        # Blocked first, so the signal waits for sigwait instead of a handler.
        signal.pthread_sigmask(signal.SIG_BLOCK, stop)
        signal.sigwait(stop)
        serve.delete(APP_NAME)
    return 0


def _status(args: argparse.Namespace) -> int:
    """Print each deployment's state and replicas; exit 1 unless the app is RUNNING."""
    try:
        require_ray_serve()
    except ConveyorError as exc:
        print(f"conveyor ray status: {exc.message}", file=sys.stderr)
        return 2
    from ray import serve

    _connect(args.address)
    app = serve.status().applications.get(APP_NAME)
    if app is None:
        print(f"conveyor ray status: no application {APP_NAME!r} on this cluster", file=sys.stderr)
        return 1
    print(f"{APP_NAME}: {_word(app.status)}{' - ' + app.message if app.message else ''}")
    for name, deployment in sorted(app.deployments.items()):
        replicas = ", ".join(
            f"{state} {n}" for state, n in sorted(deployment.replica_states.items())
        )
        print(f"  {name:<24} {deployment.status:<10} {replicas or 'no replicas'}")
        if deployment.message:
            print(f"    {deployment.message}")
    return 0 if _word(app.status) == "RUNNING" else 1


def _word(state: Any) -> str:
    """A Ray Serve status enum as its value ("RUNNING"), not its repr."""
    return str(getattr(state, "value", state))
