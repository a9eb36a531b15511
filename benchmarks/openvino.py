"""OpenVINO against onnxruntime on the same ONNX file: speed over HTTP, and memory.

    python -m benchmarks.openvino            # one to two minutes (seven servers, 3 s points)
    python -m benchmarks.openvino --short    # the smoke test's run (tests/benchmarks)

Speed: the built-in ``mlp`` example's ONNX file (256 -> 2048 -> 16, about 2 MB of weights,
the built-in config's dynamic batching) served twice from one server, as ``mlp_onnxruntime``
and ``mlp_openvino``, each with one inference thread: onnxruntime with ``instances = 1`` and
``intra_op_threads = inter_op_threads = 1``; OpenVINO with ``instances = 1`` and
``[openvino] num_streams = 1, inference_num_threads = 1, infer_requests = 1``. Closed loop at
each concurrency over HTTP (binary tensors), the server on core 0 and the generator on
core 1; beside it the in-process engine on core 0 (no transport: the limit). Over HTTP
the two backends take turns at each concurrency, so load from elsewhere falls on both.

Memory: a bigger MLP (``--megabytes`` of FP32 weights, most of them in its first layer),
served once per backend and execution count, each server fresh: one execution in flight
(``instances = 1``; OpenVINO ``infer_requests = 1``) against eight (onnxruntime:
``instances = 8`` over its one shared session; OpenVINO: ``infer_requests = 8`` of its one
compiled model; OpenVINO gives a model no more streams than the cores it may use, so on
one core they queue on one stream). The server's RSS, PSS and USS (psutil, summed over the
server and any process below it) are read after it loaded the model and again after a load
at the same concurrency, while its arenas and request buffers are still held. Beside them,
each runtime serving the ``tiny`` example alone: USS above that is what the model costs.

Writes ``openvino.json``, ``openvino.md`` and ``openvino.png`` into ``--out``
(benchmarks/results by default) and prints the tables.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks import common
from benchmarks.common import markdown, ms, pin_plan, pinned, rate
from conveyor.bench import BenchSpec, Point, Report, TargetSpec, run_bench
from conveyor.examples import example_repository, onnx_models
from conveyor.testing import RunningServer, run_server

BACKENDS = ("onnxruntime", "openvino")
MIB = 2**20

# One inference thread each: the same work per core on both sides.
SPEED_OPTIONS = {
    "onnxruntime": "[onnxruntime]\nintra_op_threads = 1\ninter_op_threads = 1\n",
    "openvino": ("[openvino]\nnum_streams = 1\ninference_num_threads = 1\ninfer_requests = 1\n"),
}
# The built-in mlp's config, with one instance.
SPEED_CONFIG = """backend = "{backend}"
max_batch_size = 64
max_queue_size = 1024
instances = 1

[dynamic_batching]
max_queue_delay_us = 200

{options}"""

# No dynamic batching: N requests in flight are N executions.
MEMORY_CONFIG = """backend = "{backend}"
max_batch_size = 8
max_queue_size = 1024
instances = {instances}

{options}"""


def memory_options(backend: str, executions: int) -> tuple[int, str]:
    """(instances, the backend's table) for ``executions`` concurrent executions."""
    if backend == "onnxruntime":  # N instance threads over one session
        return executions, "[onnxruntime]\nintra_op_threads = 1\ninter_op_threads = 1\n"
    # One instance thread starts batches; the compiled model's infer requests run them.
    table = f"[openvino]\ninference_num_threads = 1\ninfer_requests = {executions}\n"
    return 1, table


def write_model(root: Path, name: str, onnx_file: Path, config: str) -> None:
    folder = root / name / "1"
    folder.mkdir(parents=True)
    shutil.copyfile(onnx_file, folder / "model.onnx")
    (root / name / "config.toml").write_text(config)


def speed_repository(root: Path) -> dict[str, str]:
    """backend -> model name, both over the built-in mlp's ONNX file."""
    mlp_file = example_repository() / "mlp" / "1" / "model.onnx"
    names = {}
    for backend in BACKENDS:
        names[backend] = f"mlp_{backend}"
        config = SPEED_CONFIG.format(backend=backend, options=SPEED_OPTIONS[backend])
        write_model(root, names[backend], mlp_file, config)
    return names


def measure_speed(
    concurrency: Sequence[int], duration: float, warmup: float, cpus: tuple[Any, Any]
) -> dict[str, dict[str, Report]]:
    """HTTP, then in-process. Over HTTP the backends take turns at each concurrency, so a
    burst of load from elsewhere on a shared machine falls on both rather than on one."""
    server_cpus, generator_cpus = cpus
    served: dict[str, Report] = {}
    inprocess: dict[str, Report] = {}
    with tempfile.TemporaryDirectory() as tmp:
        names = speed_repository(Path(tmp))
        with (
            common.serve(server_cpus, repository=tmp) as (http_url, _grpc_url),
            pinned(generator_cpus),
        ):
            for c in concurrency:
                for backend, name in names.items():
                    print(f"== HTTP {name} c={c}", file=sys.stderr)
                    report = run_bench(
                        BenchSpec(TargetSpec(http_url, name), label=f"{backend}, HTTP"),
                        [Point(concurrency=c, warmup_s=warmup, duration_s=duration)],
                        progress=False,
                        command="python -m benchmarks.openvino",
                    )
                    joined(served, backend, report)
        for backend, name in names.items():  # one child (one model load) per backend
            print(f"== in-process {name}", file=sys.stderr)
            inprocess[backend] = common.run_inprocess(
                name,
                concurrency,
                duration=duration,
                warmup=warmup,
                cpus=server_cpus,
                repository=tmp,
                label=f"{backend}, in-process",
            )
    return {"served": served, "inprocess": inprocess}


def joined(reports: dict[str, Report], backend: str, report: Report) -> None:
    """One report per backend: a later point's report adds its points to the first one."""
    if backend in reports:
        reports[backend].points.extend(report.points)
    else:
        reports[backend] = report


def process_memory(pid: int) -> dict[str, int]:
    """RSS, PSS, USS and anonymous memory in bytes, summed over ``pid`` and its children.

    USS and PSS count a shared library's pages as this process's own while no other
    process maps them, so they move with whatever else runs on the machine (another
    OpenVINO process halves the plugin's share). Anonymous memory (heap, arenas, weights
    read from the file) does not: it is what the model costs.
    """
    import psutil

    root = psutil.Process(pid)
    totals = {"rss": 0, "pss": 0, "uss": 0, "anonymous": 0, "processes": 0}
    for proc in [root, *root.children(recursive=True)]:
        info = proc.memory_full_info()
        totals["rss"] += info.rss
        totals["pss"] += info.pss
        totals["uss"] += info.uss
        totals["anonymous"] += anonymous_bytes(proc.pid)
        totals["processes"] += 1
    return totals


def anonymous_bytes(pid: int) -> int:
    """The ``Anonymous:`` line of /proc/PID/smaps_rollup (Linux), in bytes."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, _, value = line.partition(":")
        if key == "Anonymous":
            return int(value.split()[0]) * 1024  # "Anonymous:   123456 kB"
    return 0


def openvino_streams(model_file: Path, cpus: Any) -> dict[str, int]:
    """What OpenVINO makes of the memory configs on ``cpus`` (it caps streams at the cores)."""
    from conveyor.backends.openvino_telemetry import keep_telemetry_off

    keep_telemetry_off()
    import openvino as ov  # type: ignore[import-untyped]

    with pinned(cpus):  # OpenVINO reads the process's CPU affinity when it compiles
        compiled = ov.Core().compile_model(str(model_file), "CPU", {"INFERENCE_NUM_THREADS": "1"})
    return {
        "num_streams": int(str(compiled.get_property("NUM_STREAMS"))),
        "inference_num_threads": int(compiled.get_property("INFERENCE_NUM_THREADS")),
    }


@contextlib.contextmanager
def pinned_server(repository: Path, cpus: Any) -> Iterator[RunningServer]:
    """``conveyor serve repository`` started on ``cpus`` (this process is not left pinned)."""
    with contextlib.ExitStack() as stack:
        with pinned(cpus):  # the server inherits the affinity when it starts
            server = stack.enter_context(run_server(repository))
        yield server


def measure_server(
    repo: Path, model: str, executions: int, duration: float, cpus: tuple[Any, Any]
) -> dict[str, Any]:
    """A fresh server's memory once loaded and after ``executions`` concurrent requests."""
    server_cpus, generator_cpus = cpus
    with pinned_server(repo, server_cpus) as server:
        loaded = process_memory(server.process.pid)
        with pinned(generator_cpus):
            report = run_bench(
                BenchSpec(TargetSpec(server.http_url, model)),
                [Point(concurrency=executions, warmup_s=0.2, duration_s=duration)],
                progress=False,
            )
        after = process_memory(server.process.pid)
    point = report.points[0]
    return {
        "loaded": loaded,
        "after_load": after,
        "infer_per_s": point.infer_per_s,
        "errors": point.errors,
    }


def measure_memory(
    megabytes: int, executions: Sequence[int], duration: float, cpus: tuple[Any, Any]
) -> dict[str, Any]:
    """Per backend: ``alone`` (the tiny example: the runtime's own cost) and each count."""
    # features x hidden FP32 in the first layer; the second (hidden x 16) adds under 1%.
    features = 1024
    hidden = max(256, megabytes * MIB // (4 * features))
    results: dict[str, Any] = {backend: {} for backend in BACKENDS}
    with tempfile.TemporaryDirectory() as tmp:
        model_file = onnx_models.mlp(Path(tmp) / "big.onnx", features=features, hidden=hidden)
        tiny_file = onnx_models.tiny(Path(tmp) / "tiny.onnx")
        results["model"] = {
            "features": features,
            "hidden": hidden,
            "weights_bytes": 4 * (features * hidden + hidden + hidden * 16 + 16),
            "file_bytes": model_file.stat().st_size,
        }
        for backend in BACKENDS:
            runs = [("alone", tiny_file, 1)] + [(str(c), model_file, c) for c in executions]
            for key, onnx_file, count in runs:
                repo = Path(tmp) / f"{backend}-{key}"
                instances, options = memory_options(backend, count)
                config = MEMORY_CONFIG.format(backend=backend, instances=instances, options=options)
                write_model(repo, "model", onnx_file, config)
                print(f"== memory {backend} {key}", file=sys.stderr)
                results[backend][key] = measure_server(repo, "model", count, duration, cpus)
        results["openvino_effective"] = openvino_streams(model_file, cpus[0])
    return results


SPEED_HEAD = ("backend", "c", "HTTP infer/s", "p50 ms", "p99 ms", "in-process infer/s",
              "in-process p50 ms", "HTTP / in-process")  # fmt: skip
MEMORY_HEAD = ("backend", "executions in flight", "RSS MiB", "PSS MiB", "USS MiB",
               "anon. loaded MiB", "anon. after load MiB",
               "anon. above runtime alone MiB (x weights)", "anon. vs 1 in flight")  # fmt: skip


def speed_table(speed: dict[str, dict[str, Report]]) -> str:
    rows: list[Sequence[str]] = [SPEED_HEAD]
    for backend in BACKENDS:
        engine = {p.concurrency: p for p in speed["inprocess"][backend].points}
        for point in speed["served"][backend].points:
            limit = engine[point.concurrency]
            errors = f" ({point.errors} errors)" if point.errors else ""
            rows.append(
                [
                    backend,
                    str(point.concurrency),
                    rate(point.infer_per_s) + errors,
                    ms(point.latency_ms["p50"]),
                    ms(point.latency_ms["p99"]),
                    rate(limit.infer_per_s),
                    ms(limit.latency_ms["p50"]),
                    f"{point.infer_per_s / limit.infer_per_s:.2f}" if limit.infer_per_s else "-",
                ]
            )
    return markdown(rows)


def memory_table(memory: dict[str, Any]) -> str:
    """After-load figures; "anon." is anonymous memory (see ``process_memory``)."""
    weights = memory["model"]["weights_bytes"]
    rows: list[Sequence[str]] = [MEMORY_HEAD]
    for backend in BACKENDS:
        alone = memory[backend]["alone"]["after_load"]["anonymous"]
        first = memory[backend]["1"]["after_load"]["anonymous"]
        for key, result in memory[backend].items():
            after = result["after_load"]
            above = after["anonymous"] - alone
            rows.append(
                [
                    backend,
                    "runtime alone (tiny model)" if key == "alone" else key,
                    f"{after['rss'] / MIB:.0f}",
                    f"{after['pss'] / MIB:.0f}",
                    f"{after['uss'] / MIB:.0f}",
                    f"{result['loaded']['anonymous'] / MIB:.0f}",
                    f"{after['anonymous'] / MIB:.0f}",
                    "" if key == "alone" else f"{above / MIB:.0f} ({above / weights:.2f}x)",
                    "" if key == "alone" else f"{after['anonymous'] / first:.2f}x",
                ]
            )
    return markdown(rows)


def plot(speed: dict[str, dict[str, Report]], memory: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for backend, color in zip(BACKENDS, ("tab:blue", "tab:orange"), strict=True):
        for where, style in (("served", "-o"), ("inprocess", "--s")):
            points = speed[where][backend].points
            label = f"{backend}, {'HTTP' if where == 'served' else 'in-process'}"
            xs = [p.concurrency for p in points]
            left.plot(xs, [p.infer_per_s for p in points], style, color=color, label=label)
    left.set_xscale("log", base=2)
    ticks = [p.concurrency for p in speed["served"][BACKENDS[0]].points]
    left.set_xticks(ticks, [str(c) for c in ticks])
    left.set_xlabel("concurrency (closed loop)")
    left.set_ylabel("infer/s")
    left.set_title("mlp, one inference thread on one core")
    left.legend(fontsize=8)
    labels, values, colors = [], [], []
    for backend, color in zip(BACKENDS, ("tab:blue", "tab:orange"), strict=True):
        alone = memory[backend]["alone"]["after_load"]["anonymous"]
        for key, result in memory[backend].items():
            if key != "alone":
                labels.append(f"{backend}\n{key} in flight")
                values.append((result["after_load"]["anonymous"] - alone) / MIB)
                colors.append(color)
    right.bar(labels, values, color=colors)
    weights = memory["model"]["weights_bytes"] / MIB
    right.axhline(weights, color="gray", linestyle=":", label=f"weights ({weights:.0f} MiB)")
    right.tick_params(axis="x", labelsize=8)
    right.set_ylabel("anon. memory above runtime alone, MiB")
    right.set_title("memory after load, by executions in flight")
    right.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--short", action="store_true", help="a smoke run: short points, small model")
    p.add_argument("--duration", type=float, help="measured seconds per point")
    p.add_argument("--concurrency", default="1,4,16")
    p.add_argument("--megabytes", type=int, help="weights of the memory model (default 64)")
    p.add_argument("--out", default=str(common.RESULTS))
    args = p.parse_args(argv)
    duration = args.duration or (0.5 if args.short else 3.0)
    warmup = 0.2 if args.short else 1.0
    megabytes = args.megabytes or (16 if args.short else 64)
    concurrency = [int(c) for c in args.concurrency.split(",")]
    cpus = pin_plan()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    speed = measure_speed(concurrency, duration, warmup, cpus)
    memory = measure_memory(megabytes, (1, 8), duration, cpus)
    plot(speed, memory, out / "openvino.png")
    command = "python -m benchmarks.openvino " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    effective = memory["openvino_effective"]
    text = "\n".join(
        [
            f"Measured {common.today()} on {common.machine_line()}; server and in-process "
            f"runs pinned to one core, generator to another; {duration:g} s per point after "
            f"{warmup:g} s warm-up. Command: `{command.strip()}`.",
            "",
            speed_table(speed),
            "",
            f"Memory: MLP with {memory['model']['weights_bytes'] / MIB:.0f} MiB of FP32 "
            f"weights. OpenVINO compiled it with {effective['num_streams']} stream(s) of "
            f"{effective['inference_num_threads']} thread(s) on the server's cores, so its "
            "infer requests in flight queue on that stream.",
            "",
            memory_table(memory),
            "",
        ]
    )
    (out / "openvino.md").write_text(text)
    everything = {
        "command": command.strip(),
        "machine": common.machine_line(),
        "duration_s": duration,
        "speed": {
            where: {backend: r.to_dict() for backend, r in reports.items()}
            for where, reports in speed.items()
        },
        "memory": memory,
    }
    (out / "openvino.json").write_text(json.dumps(everything, indent=1))
    print(text)
    print(f"({time.monotonic() - started:.0f} s; written to {out})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
