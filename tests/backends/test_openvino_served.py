"""The OpenVINO backend behind the server: config.pbtxt's Triton parameters, HTTP with
tritonclient, and a server without openvino installed."""

from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest
import tritonclient.http as httpclient

from conveyor.errors import RepositoryError
from conveyor.examples import onnx_models
from conveyor.repository.layout import Repository
from conveyor.testing import run_server
from tests.backends.openvino_models import write_ir
from tests.polling import wait_until

PBTXT = """
backend: "openvino"
max_batch_size: 8
dynamic_batching {{ max_queue_delay_microseconds: 2000 }}
{parameters}
"""


def parameter(key: str, value: str) -> str:
    return f'parameters: {{ key: "{key}" value: {{ string_value: "{value}" }} }}'


def mlp_repo(root, parameters: str = ""):
    write_ir(root / "mlp" / "1", onnx_models.mlp)
    (root / "mlp" / "config.pbtxt").write_text(PBTXT.format(parameters=parameters))
    return root


def test_triton_parameters_become_openvino_options(tmp_path):
    params = "\n".join(
        [
            parameter("PERFORMANCE_HINT", "THROUGHPUT"),
            parameter("NUM_STREAMS", "2"),
            parameter("INFERENCE_NUM_THREADS", "2"),
            parameter("TARGET_DEVICE", "CPU"),
        ]
    )
    config = Repository(mlp_repo(tmp_path, params)).source("mlp").config
    assert config.backend == "openvino"
    assert dict(config.backend_options) == {
        "performance_hint": "THROUGHPUT",
        "num_streams": 2,
        "inference_num_threads": 2,
    }


def test_a_parameter_openvino_does_not_read_is_kept_out_of_its_options_with_a_warning(tmp_path):
    params = "\n".join([parameter("NUM_STREAMS", "2"), parameter("execute_delay_ms", "5")])
    source = Repository(mlp_repo(tmp_path, params)).source("mlp")
    assert dict(source.config.backend_options) == {"num_streams": 2}
    assert dict(source.config.ignored_parameters) == {"execute_delay_ms": "5"}
    assert [w for w in source.warnings if "'execute_delay_ms'" in w] == [
        "model 'mlp': config.pbtxt parameters key 'execute_delay_ms' is not read by the openvino "
        "backend (accepted and ignored; it reads compilation_num_threads, infer_requests, "
        "inference_num_threads, num_streams, performance_hint, precision_hint)"
    ]


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("TARGET_DEVICE", "GPU", "CPU only"),
        ("CPU_EXTENSION_PATH", "/x.so", "loads no custom CPU extensions"),
        ("ENABLE_BATCH_PADDING", "YES", "does not pad batches"),
    ],
)
def test_triton_parameters_conveyor_lacks_are_refused_by_name(tmp_path, key, value, words):
    with pytest.raises(RepositoryError) as caught:
        Repository(mlp_repo(tmp_path, parameter(key, value))).source("mlp")
    assert f"parameters[{key!r}]" in caught.value.message
    assert words in caught.value.message


def test_served_over_http_with_tritonclient(tmp_path):
    mlp_repo(tmp_path, parameter("PERFORMANCE_HINT", "LATENCY"))
    x = np.random.default_rng(2).standard_normal((8, 256)).astype(np.float32)
    with run_server(tmp_path) as server:
        client = httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}", concurrency=8)
        metadata = client.get_model_metadata("mlp")
        assert metadata["platform"] == "openvino"
        pending = []
        for row in range(8):
            tensor = httpclient.InferInput("INPUT0", [1, 256], "FP32")
            tensor.set_data_from_numpy(x[row : row + 1], binary_data=True)
            pending.append(client.async_infer("mlp", [tensor]))
        rows = [p.get_result(timeout=30).as_numpy("OUTPUT0") for p in pending]
        tensor = httpclient.InferInput("INPUT0", [8, 256], "FP32")
        tensor.set_data_from_numpy(x, binary_data=True)
        whole = client.infer("mlp", [tensor]).as_numpy("OUTPUT0")
        client.close()
    np.testing.assert_allclose(np.concatenate(rows), whole, rtol=1e-5, atol=1e-5)


def test_without_openvino_the_model_fails_saying_what_to_install(tmp_path):
    blocker = tmp_path / "site"
    blocker.mkdir()
    # Runs at interpreter start (sitecustomize): any later `import openvino` fails.
    (blocker / "sitecustomize.py").write_text(
        textwrap.dedent(
            """
            import sys
            class _NoOpenVino:
                def find_spec(self, name, path=None, target=None):
                    if name == "openvino" or name.startswith("openvino."):
                        raise ImportError("openvino is blocked for this test")
                    return None
            sys.meta_path.insert(0, _NoOpenVino())
            """
        )
    )
    repo = tmp_path / "repo"
    mlp_repo(repo)
    env = dict(os.environ, PYTHONPATH=str(blocker))
    with run_server(repo, env=env, wait=False) as server:
        # The server logs the model's load failure (and may go on without it, or exit).
        wait_until(lambda: "pip install '.[openvino]'" in server.output(), timeout=60)
        output = server.output()
    assert "openvino package is not installed" in output
