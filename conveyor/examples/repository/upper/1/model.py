"""A Python model: upper-cases the ASCII letters of every BYTES element."""

import numpy as np


class Model:
    thread_safe = True  # it keeps no state, so all instances share one object

    def infer(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        text = inputs["INPUT0"]
        upper = np.array([value.upper() for value in text.flat], dtype=object)
        return {"OUTPUT0": upper.reshape(text.shape)}
