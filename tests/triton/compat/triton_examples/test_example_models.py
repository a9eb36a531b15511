"""The repository benchmarks/triton_examples.py builds for Triton's examples loads, and its
models answer as the examples expect (the examples themselves are not in this
repository; the benchmark runs them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from benchmarks.triton_examples import build_model_control_repository, build_repository
from conveyor.testing import run_server


def sequence_outputs(
    client: httpclient.InferenceServerClient, model: str, sequence_id: int | str, values: list[int]
) -> list[int]:
    outputs = []
    for index, value in enumerate(values):
        given = httpclient.InferInput("INPUT", [1, 1], "INT32")
        given.set_data_from_numpy(np.full((1, 1), value, np.int32))
        result = client.infer(
            model,
            [given],
            sequence_id=sequence_id,
            sequence_start=index == 0,
            sequence_end=index == len(values) - 1,
        )
        outputs.append(int(result.as_numpy("OUTPUT")[0][0]))
    return outputs


def test_every_example_model_loads_and_answers(tmp_path: Path) -> None:
    build_repository(tmp_path / "models")
    with run_server(tmp_path / "models") as server:
        client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
        try:
            index = client.get_model_repository_index()
            assert index and all(entry["state"] == "READY" for entry in index), index
            # The values and answers of simple_http_sequence_sync_infer_client.py.
            values = [0, 11, 7, 5, 3, 2, 0, 1]
            assert sequence_outputs(client, "simple_sequence", 1000, values) == [1, *values[1:]]
            dyna = sequence_outputs(client, "simple_dyna_sequence", 1001, values)
            assert dyna == [1, *values[1:-1], 1 + 1001]
            negatives = [20, -11, -7, -5, -3, -2, 0, -1]
            running = list(np.cumsum(negatives))
            strings = sequence_outputs(client, "simple_string_dyna_sequence", "1002", negatives)
            assert strings == [*running[:-1], running[-1] + 1002]
        finally:
            client.close()
        grpc = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
        try:
            config = grpc.get_model_config("densenet_onnx").config
            assert config.input[0].format == config.input[0].FORMAT_NCHW
            assert config.output[0].label_filename == "densenet_labels.txt"
        finally:
            grpc.close()


def test_model_control_repository_has_the_size_asked_for(tmp_path: Path) -> None:
    build_model_control_repository(tmp_path, 7)
    assert sorted(p.name for p in tmp_path.iterdir())[-1] == "simple"
    assert len(list(tmp_path.iterdir())) == 7
