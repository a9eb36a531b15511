"""A decoupled Python model: yields its prompt back one character at a time.

``infer`` is a generator: each ``yield`` is one response, sent to the client as soon as it
is produced. A client that goes away closes the generator at its next ``yield``.
"""

import time

import numpy as np

DELAY_S = 0.05  # between characters, so a streaming client sees them arrive


class Model:
    thread_safe = True  # it keeps no state, so all instances share one object

    def infer(self, inputs: dict[str, np.ndarray]):
        text = inputs["text_input"].reshape(-1)[0].decode("utf-8", errors="replace")
        streaming = bool(inputs["stream"].reshape(-1)[0]) if "stream" in inputs else True
        if not streaming:
            yield {"text_output": np.array([text.encode("utf-8")], dtype=object)}
            return
        for index, character in enumerate(text):
            if index:
                time.sleep(DELAY_S)
            yield {"text_output": np.array([character.encode("utf-8")], dtype=object)}
