"""One real server for the large-tensor tests, over a repository built here.

- ``identity``: ONNX Identity over FP32 [-1] (tensors of any size, returned as sent)
- ``strings``: ONNX Identity over tensor(string) [-1] (onnxruntime wants UTF-8)
- ``echo_bytes``: Python, BYTES [-1] returned as sent (Python models take any bytes)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conveyor.testing import RunningServer, run_server
from tests.server.large.large_models import MiB, build_repository


@pytest.fixture(scope="module")
def large_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    repository = build_repository(tmp_path_factory.mktemp("large-models"))
    extra = ["--max-body-bytes", str(32 * MiB), "--grpc-max-message-bytes", str(32 * MiB)]
    with run_server(repository, extra_args=extra) as running:
        yield running
        assert running.process.poll() is None, "the server died during the tests"
