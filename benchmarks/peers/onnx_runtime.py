"""A minimal MLServer runtime serving an ONNX file with onnxruntime (for the comparison only).

Runs inside MLServer's own virtual environment (it imports ``mlserver``), never in
Conveyor's. One InferenceSession per model, one intra-op thread (as every server compared
here is configured), run directly in ``predict`` as MLServer's own runtimes do.
"""

from __future__ import annotations

import onnxruntime as ort
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse
from mlserver.utils import get_model_uri


class OnnxRuntime(MLModel):
    async def load(self) -> bool:
        uri = await get_model_uri(self._settings)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(uri, options, providers=["CPUExecutionProvider"])
        self._output_names = [o.name for o in self._session.get_outputs()]
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        feeds = {tensor.name: NumpyCodec.decode_input(tensor) for tensor in payload.inputs}
        results = self._session.run(self._output_names, feeds)
        return InferenceResponse(
            model_name=self.name,
            model_version=self.version,
            outputs=[
                NumpyCodec.encode_output(name, value)
                for name, value in zip(self._output_names, results, strict=True)
            ],
        )
