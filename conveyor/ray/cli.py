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

DEPLOY_TIMEOUT_S = 300.0

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
    deploy.add_argument(
        "--timeout",
        type=float,
        default=DEPLOY_TIMEOUT_S,
        help=f"seconds to wait for every replica to run (default {DEPLOY_TIMEOUT_S:g})",
    )
    deploy.add_argument(
        "--wait-for-nodes",
        action="store_true",
        help="the cluster's autoscaler adds nodes: deploy even when the replicas do not fit "
        "the nodes there now, and wait for them (up to --timeout)",
    )
    deploy.set_defaults(handler=_deploy, default_log_level="warning")
    status = sub.add_parser("status", help="the deployed models' replicas and states")
    status.add_argument("--address", default="auto", help=ADDRESS_HELP)
    status.set_defaults(handler=_status, default_log_level="warning")


def _deploy(args: argparse.Namespace) -> int:
    try:
        require_ray_serve()
        from conveyor.ray.app import asks
        from conveyor.ray.rollout import unscheduled_after_s

        application = build_app(args.repository)
        wanted = asks(args.repository)
        unscheduled_after = unscheduled_after_s()
    except ConveyorError as exc:
        print(f"conveyor ray deploy: {exc.message}", file=sys.stderr)
        return 2
    from ray import serve

    from conveyor.ray.resources import shortfall
    from conveyor.ray.rollout import cluster_cpus, wait_running

    if not _connect("deploy", args.address):
        return 2
    cluster = cluster_cpus()
    _say(f"conveyor ray deploy: cluster {cluster.describe()}; replicas to start:")
    for ask in wanted:
        _say(f"  {ask.describe()}")
    problem = shortfall(wanted, cluster)
    if problem is not None and not args.wait_for_nodes:
        print(
            f"conveyor ray deploy: the cluster cannot hold these replicas: {problem}. Lower "
            "[ray] num_cpus in the models' config, or add nodes (--wait-for-nodes when the "
            "cluster's autoscaler adds them). Nothing was deployed.",
            file=sys.stderr,
        )
        return 1
    # HTTP options take effect when Serve first starts on the cluster; later deploys reuse it.
    serve.start(http_options={"host": args.http_host, "port": args.http_port})
    # Not waiting here: wait_running waits with a bound and says what it is waiting for.
    serve.run_many(
        [serve.RunTarget(application, name=APP_NAME, route_prefix="/")],
        wait_for_ingress_deployment_creation=False,
        wait_for_applications_running=False,
    )
    failure = wait_running(
        APP_NAME, wanted, args.timeout, _say,
        wait_for_nodes=args.wait_for_nodes, unscheduled_after=unscheduled_after,
    )  # fmt: skip
    if failure is not None:
        print(
            f"conveyor ray deploy: {failure}. The application stays deployed (Ray Serve "
            "keeps trying); `conveyor ray status` shows it.",
            file=sys.stderr,
        )
        return 1
    _wait_for_proxies()
    _say(
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


def _connect(command: str, address: str) -> bool:
    """Connect to the cluster; False (after saying why) when it refuses this process."""
    from conveyor.errors import ClusterRefused
    from conveyor.ray.connect import connect

    try:
        connect(address)
    except ClusterRefused as exc:
        print(f"conveyor ray {command}: {exc.message}", file=sys.stderr)
        return False
    return True


def _wait_for_proxies() -> None:
    """Until Serve's HTTP proxies route to the application (what ``serve.run`` waits for
    after the application runs), so a request sent right after the command is answered."""
    try:
        from ray.serve.context import _get_global_client

        client = _get_global_client()
        if client is not None:
            client.wait_for_proxies_serving(wait_for_applications_running=True)
    except Exception:  # an internal API: at worst the first request comes a little early
        pass


def _say(line: str) -> None:
    print(line, flush=True)  # progress, seen as it happens even through a pipe


def _status(args: argparse.Namespace) -> int:
    """Print each deployment's state and replicas; exit 1 unless the app is RUNNING."""
    try:
        require_ray_serve()
    except ConveyorError as exc:
        print(f"conveyor ray status: {exc.message}", file=sys.stderr)
        return 2
    from ray import serve

    from conveyor.ray.rollout import replicas_text, word

    if not _connect("status", args.address):
        return 2
    app = serve.status().applications.get(APP_NAME)
    if app is None:
        print(f"conveyor ray status: no application {APP_NAME!r} on this cluster", file=sys.stderr)
        return 1
    print(f"{APP_NAME}: {word(app.status)}{' - ' + app.message if app.message else ''}")
    for name, deployment in sorted(app.deployments.items()):
        replicas = replicas_text(deployment.replica_states)
        print(f"  {name:<24} {word(deployment.status):<10} {replicas}")
        if deployment.message:
            print(f"    {deployment.message}")
    return 0 if word(app.status) == "RUNNING" else 1
