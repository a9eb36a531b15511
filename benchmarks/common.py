"""Shared by the suite scripts: CPU pinning, a served repository, in-process runs, tables.

Pinning follows docs/benchmarks.md: the server on one core, the load generator on another, so the
server's figure is what one core does and the generator never steals from it. A child
process inherits its parent's CPU affinity at start, so ``pinned(core)`` around a start
pins the child without a shell or ``preexec_fn``.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import platform
import shlex
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
if str(ROOT) not in sys.path:  # run as `python -m benchmarks.x` from a checkout, not installed
    sys.path.insert(0, str(ROOT))

from conveyor.bench import Report, read_json  # noqa: E402

IDENTITY_SHAPE = {"INPUT0": (1024 * 1024,)}  # 4 MiB of FP32


def cores() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def pin_plan() -> tuple[set[int] | None, set[int] | None]:
    """(server cores, generator cores): core 0 and core 1 when there are two or more."""
    available = cores()
    if len(available) < 2:
        return None, None
    return {available[0]}, {available[1]}


@contextlib.contextmanager
def pinned(cpus: set[int] | None) -> Iterator[None]:
    """Run the body (and every process it starts) on ``cpus``; restore afterwards."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


@contextlib.contextmanager
def serve(
    cpus: set[int] | None,
    http_url: str | None = None,
    grpc_url: str | None = None,
    repository: str | None = None,
) -> Iterator[tuple[str, str]]:
    """``conveyor serve`` pinned to ``cpus`` (unless URLs of a running server are given)."""
    if http_url and grpc_url:
        yield http_url, grpc_url
        return
    from conveyor.testing import run_server

    with contextlib.ExitStack() as stack:
        with pinned(cpus):  # the server process inherits the pinning when it starts
            server = stack.enter_context(run_server(repository))
        yield server.http_url, server.grpc_url


def free_port() -> int:
    """A loopback TCP port free right now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ports_free(*ports: int) -> bool:
    """True when every port can be bound on loopback now (Triton's tests name fixed ports)."""
    for port in ports:
        with socket.socket() as sock:
            # As a server binds: a port left in TIME_WAIT by the last run is free.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def last_lines(text: str, count: int = 6) -> str:
    """A program's last non-blank lines on one line, to say why it failed."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-count:])[:400]


def child_env() -> dict[str, str]:
    """This environment with the checkout's root first on PYTHONPATH (conveyor, benchmarks)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def run_inprocess(
    model: str,
    concurrency: Sequence[int],
    *,
    duration: float,
    warmup: float,
    cpus: set[int] | None,
    shapes: dict | None = None,
    repository: str | None = None,
    label: str = "inprocess",
) -> Report:
    """``conveyor bench MODEL --url inprocess`` in a child process pinned like the server."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        command = [
            sys.executable,
            "-m",
            "conveyor",
            "bench",
            model,
            "--url",
            "inprocess",
            "-c",
            ",".join(map(str, concurrency)),
            "-d",
            str(duration),
            "--warmup",
            str(warmup),
            "-q",
            "--json",
            str(out),
            "--label",
            label,
        ]
        for name, shape in (shapes or {}).items():
            command += ["--shape", f"{name}:{','.join(map(str, shape))}"]
        if repository:
            command += ["--repository", repository]
        with pinned(cpus):
            done = subprocess.run(
                command,
                env=child_env(),
                capture_output=True,
                text=True,
                timeout=120 + len(concurrency) * (duration + warmup + 30),
            )
        if not out.exists():
            raise RuntimeError(f"in-process run failed:\n{done.stdout}\n{done.stderr}")
        return read_json(out)


def machine_line() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, load average {load:.2f} at the end"
    )


def today() -> str:
    return datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")


def markdown(rows: Sequence[Sequence[str]], align_left: int = 2) -> str:
    """A Markdown table from rows (the first is the header); the first columns left-aligned."""
    head, *body = rows
    rule = [":---" if i < align_left else "---:" for i in range(len(head))]
    return "\n".join("| " + " | ".join(map(str, r)) + " |" for r in (head, rule, *body))


def ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if value < 100 else f"{value:.0f}"


def rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


def command_line(module: str, argv: Sequence[str] | None) -> str:
    """How a benchmark was run, for its report: ``python -m MODULE ARGS``."""
    args = list(argv if argv is not None else sys.argv[1:])
    return f"python -m {module} {shlex.join(args)}".strip()


def write_report(out: str | Path, name: str, measured: str, table: str, data: object) -> str:
    """``name``.md (the "Measured ..." paragraph, then the table) and ``name``.json (the
    data) in ``out``; returns the text."""
    text = "\n".join([measured, "", table, ""])
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.md").write_text(text)
    (folder / f"{name}.json").write_text(json.dumps(data, indent=1))
    return text
