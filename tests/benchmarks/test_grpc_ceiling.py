"""The canned gRPC server of the benchmarks answers what perf_analyzer asks before it runs,
and the 4 MiB comparison's table reads its runs right."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

grpcclient = pytest.importorskip("tritonclient.grpc")

from benchmarks.grpc_ceiling import IDENTITY_ELEMENTS  # noqa: E402
from benchmarks.large_grpc_ceiling import Run, busy_between, table  # noqa: E402
from conveyor.testing import free_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# The canned server in a child process of its own, not through canned_server(): that one
# uses multiprocessing, whose resource tracker would then live on in the pytest process,
# where other tests count their children.
SERVE = """
import sys
from benchmarks.grpc_ceiling import _main

class Ready:
    def set(self):
        print("ready", flush=True)

_main(int(sys.argv[1]), Ready())
"""


@contextlib.contextmanager
def canned_server() -> Iterator[int]:
    port = free_port()
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    process = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(port)], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        output = process.stdout
        assert output is not None
        lines: list[str] = []
        # Read on a thread so that a server that never says "ready" fails after a bound.
        reader = threading.Thread(target=lambda: lines.append(output.readline()))
        reader.start()
        reader.join(timeout=60)
        assert lines == ["ready\n"], "the canned server did not start"
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)
        process.stdout.close()


def test_perf_analyzer_questions_are_answered() -> None:
    with canned_server() as port:
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{port}")
        try:
            assert client.get_server_metadata().name == "canned"
            identity = client.get_model_metadata("identity")
            assert [(t.name, t.datatype, list(t.shape)) for t in identity.inputs] == [
                ("INPUT0", "FP32", [-1])
            ]
            assert client.get_model_config("identity").config.max_batch_size == 0
            tiny = client.get_model_config("tiny").config
            assert (tiny.max_batch_size, list(tiny.input[0].dims)) == (64, [16])
            given = grpcclient.InferInput("INPUT0", [IDENTITY_ELEMENTS], "FP32")
            given.set_data_from_numpy(np.ones(IDENTITY_ELEMENTS, np.float32))
            answer = client.infer("identity", [given]).as_numpy("OUTPUT0")
            assert answer.shape == (IDENTITY_ELEMENTS,) and answer.dtype == np.float32
        finally:
            client.close()


def test_the_table_divides_the_rate_by_the_server_core_busy() -> None:
    runs = {
        "conveyor serve": [Run(200.0, 20_000, 0.5, 1.0), Run(100.0, 40_000, 0.5, 1.0),
                           Run(300.0, 13_000, 0.75, 1.0)],
        "canned (no-op)": [Run(190.0, 21_000, 0.4, 0.95)],
    }  # fmt: skip
    lines = table(runs).splitlines()
    # The median run of each: 200 infer/s at half a core is 400 per core.
    assert lines[2].split("|")[1:7] == [" conveyor serve ", " 200 ", " 200, 100, 300 ", " 50% ",
                                        " 100% ", " 400 "]  # fmt: skip
    assert lines[3].split("|")[-2].strip() == "475"
    assert busy_between((100, 1000), (150, 1100)) == 0.5
