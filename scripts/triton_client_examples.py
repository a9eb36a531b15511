"""Run Triton's own Python client examples against a Conveyor server; count what passes.

Triton's examples (``src/python/examples/*.py`` of triton-inference-server/client) are not
part of Conveyor: pass the folder that holds them. This script writes the models they call
(Triton's test models ``simple``, ``simple_int8``, ``simple_string``, ``simple_identity``,
``custom_identity_int32``, ``simple_sequence``, ``simple_dyna_sequence``,
``simple_string_dyna_sequence`` and the decoupled ``repeat_int32``) as Triton Python models
with config.pbtxt files, starts ``conveyor serve`` on free ports, runs every example with
``-u`` pointing at it, and prints one line per example and a JSON summary. No network.

    python scripts/triton_client_examples.py /path/to/client/src/python/examples
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from conveyor.testing import run_server

ADD_SUB = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            if a.dtype == np.object_:  # simple_string: numbers written as strings
                x, y = a.astype(np.int64), b.astype(np.int64)
                s = np.array([str(v).encode() for v in (x + y).flat], np.object_)
                d = np.array([str(v).encode() for v in (x - y).flat], np.object_)
                out0, out1 = s.reshape(a.shape), d.reshape(a.shape)
            else:
                out0, out1 = (a + b).astype(a.dtype), (a - b).astype(a.dtype)
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUTPUT0", out0), pb_utils.Tensor("OUTPUT1", out1)]
                )
            )
        return responses
"""

ADD_SUB_PBTXT = """
backend: "python"
max_batch_size: 8
input [ {{ name: "INPUT0", data_type: {t}, dims: [ 16 ] }},
        {{ name: "INPUT1", data_type: {t}, dims: [ 16 ] }} ]
output [ {{ name: "OUTPUT0", data_type: {t}, dims: [ 16 ] }},
         {{ name: "OUTPUT1", data_type: {t}, dims: [ 16 ] }} ]
"""

IDENTITY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0")
                                 .as_numpy())]
            )
            for r in requests
        ]
"""

IDENTITY_PBTXT = """
backend: "python"
max_batch_size: {batch}
input [ {{ name: "INPUT0", data_type: {t}, dims: [ -1 ] }} ]
output [ {{ name: "OUTPUT0", data_type: {t}, dims: [ -1 ] }} ]
"""

# Triton's test sequence models, as their examples check them: simple_sequence answers
# INPUT (+1 on a sequence's first request); simple_dyna_sequence adds the correlation id
# on its last; simple_string_dyna_sequence keeps a running sum, plus the id at the end.
SEQUENCE = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_name"]
        self.sums = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            value = int(pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy().flat[0])
            start, end = request.flags() & 1, request.flags() & 2
            cid = request.correlation_id()
            if self.name == "simple_string_dyna_sequence":
                total = (0 if start else self.sums.get(cid, 0)) + value
                self.sums[cid] = total
                out = total + (int(cid) if end else 0)
            else:
                out = value + (1 if start else 0)
                if end and self.name == "simple_dyna_sequence":
                    out += int(cid)
            if end:
                self.sums.pop(cid, None)
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUTPUT", np.array([[out]], np.int32))]
                )
            )
        return responses
"""

SEQUENCE_PBTXT = """
backend: "python"
max_batch_size: 1
sequence_batching { max_sequence_idle_microseconds: 5000000 }
input [ { name: "INPUT", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "OUTPUT", data_type: TYPE_INT32, dims: [ 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
"""

REPEAT = """
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            delays = pb_utils.get_input_tensor_by_name(request, "DELAY").as_numpy()
            wait = pb_utils.get_input_tensor_by_name(request, "WAIT").as_numpy()
            sender = request.get_response_sender()
            for index, (value, delay) in enumerate(zip(values, delays)):
                time.sleep(int(delay) / 1000)
                sender.send(
                    pb_utils.InferenceResponse(
                        [
                            pb_utils.Tensor("OUT", np.array([value], np.int32)),
                            pb_utils.Tensor("IDX", np.array([index], np.uint32)),
                        ]
                    )
                )
            time.sleep(int(wait[0]) / 1000)
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""

REPEAT_PBTXT = """
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "IN", data_type: TYPE_INT32, dims: [ -1 ] },
        { name: "DELAY", data_type: TYPE_UINT32, dims: [ -1 ] },
        { name: "WAIT", data_type: TYPE_UINT32, dims: [ 1 ] } ]
output [ { name: "OUT", data_type: TYPE_INT32, dims: [ 1 ] },
         { name: "IDX", data_type: TYPE_UINT32, dims: [ 1 ] } ]
"""

MODELS = {
    "simple": (ADD_SUB, ADD_SUB_PBTXT.format(t="TYPE_INT32")),
    "simple_int8": (ADD_SUB, ADD_SUB_PBTXT.format(t="TYPE_INT8")),
    "simple_string": (ADD_SUB, ADD_SUB_PBTXT.format(t="TYPE_STRING")),
    "simple_identity": (IDENTITY, IDENTITY_PBTXT.format(batch=8, t="TYPE_STRING")),
    "custom_identity_int32": (IDENTITY, IDENTITY_PBTXT.format(batch=8, t="TYPE_INT32")),
    "simple_sequence": (SEQUENCE, SEQUENCE_PBTXT),
    "simple_dyna_sequence": (SEQUENCE, SEQUENCE_PBTXT),
    "simple_string_dyna_sequence": (SEQUENCE, SEQUENCE_PBTXT),
    "repeat_int32": (REPEAT, REPEAT_PBTXT),
}


def write_repository(path: Path) -> Path:
    for name, (source, config) in MODELS.items():
        folder = path / name / "1"
        folder.mkdir(parents=True)
        (folder / "model.py").write_text(textwrap.dedent(source))
        (path / name / "config.pbtxt").write_text(textwrap.dedent(config))
    return path


def _free(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def run_examples(examples: Path, timeout: float) -> dict[str, str]:
    outcomes: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as scratch:
        repository = write_repository(Path(scratch) / "models")
        # Triton's default ports when free: an example without -u (memory_growth_test)
        # reaches the server there.
        ports = {"http_port": 8000, "grpc_port": 8001} if _free(8000) and _free(8001) else {}
        with run_server(repository, **ports) as server:
            http = server.http_url.split("://")[1]
            grpc = server.grpc_url.split("://")[1]
            for script in sorted(examples.glob("*.py")):
                text = script.read_text()
                grpc_first = "grpcclient" in text or "grpc_" in script.name
                # An example with a --protocol flag speaks HTTP unless told otherwise.
                url = grpc if grpc_first and '"--protocol"' not in text else http
                command = [sys.executable, str(script)]
                if '"--url"' in text:
                    command += ["-u", url]
                try:
                    done = subprocess.run(
                        command, capture_output=True, text=True, timeout=timeout, cwd=scratch
                    )
                except subprocess.TimeoutExpired:
                    outcomes[script.name] = "FAIL timed out"
                    continue
                last = (done.stdout + done.stderr).strip().splitlines()[-1:] or [""]
                ok = done.returncode == 0 and "error" not in last[0].lower()
                verdict = "PASS" if ok else "FAIL"
                outcomes[script.name] = f"{verdict} {last[0][:160]}"
    return outcomes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", type=Path, help="client/src/python/examples")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per example")
    args = parser.parse_args()
    outcomes = run_examples(args.examples, args.timeout)
    for name, outcome in outcomes.items():
        print(f"{name:55} {outcome}")
    passed = sum(o.startswith("PASS") for o in outcomes.values())
    print(json.dumps({"passed": passed, "total": len(outcomes)}))


if __name__ == "__main__":
    main()
