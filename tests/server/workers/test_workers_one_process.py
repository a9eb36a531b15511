"""``--workers 1 --front-end-process``: one front-end process beside the engine's, serving
both protocols, and replaced when it dies while the engine keeps its models."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from conveyor.testing import run_server
from tests.models import RepoBuilder
from tests.polling import wait_until
from tests.server.workers.workers_util import (
    front_end_pids,
    http_client,
    success_count,
    tiny_input,
    wait_front_ends,
)

pytestmark = pytest.mark.workers


def test_one_front_end_process_serves_both_protocols_and_is_replaced(tmp_path: Path) -> None:
    RepoBuilder(tmp_path).tiny()
    args = ["--workers", "1", "--front-end-process"]
    with run_server(tmp_path, extra_args=args) as server:
        (first,) = wait_front_ends(server, 1)
        assert first != server.process.pid
        client = http_client(server)
        grpc = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
        try:
            answer = client.infer("tiny", [tiny_input(httpclient)]).as_numpy("OUTPUT0")
            assert answer[0, 0] == 1.0  # tiny adds one
            grpc.infer("tiny", [tiny_input(grpcclient)])
            assert success_count(client, "tiny") == 2
        finally:
            client.close()
            grpc.close()

        os.kill(first, signal.SIGKILL)
        wait_until(lambda: front_end_pids(server) not in ([], [first]), 30, "a new front end")
        (second,) = front_end_pids(server)
        client = http_client(server)
        try:
            client.infer("tiny", [tiny_input(httpclient)])
            # The engine process kept the model and its statistics through the replacement.
            assert success_count(client, "tiny") == 3
        finally:
            client.close()
        assert front_end_pids(server) == [second]


def test_workers_0_on_one_core_serves_in_one_process(tmp_path: Path) -> None:
    RepoBuilder(tmp_path).tiny()
    cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cores)})  # the server inherits this process's one core
    try:
        with run_server(tmp_path, extra_args=["--workers", "0"]) as server:
            client = http_client(server)
            try:
                client.infer("tiny", [tiny_input(httpclient)])
            finally:
                client.close()
            assert psutil.Process(server.process.pid).children() == []
    finally:
        os.sched_setaffinity(0, cores)
