"""What a model returned, checked against what was asked of it, in one set of words.

Thread instances check a model's outputs in the engine; process instances must refuse, in
the worker, what cannot travel back (a missing output, a value that is not an array), and
the engine checks the rest once the arrays are back. Both use :func:`requested_outputs`, so
a broken model is reported the same way whichever kind of instance ran it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from conveyor.errors import InvalidInput, ModelError
from conveyor.protocol import triton_words as triton


def requested_outputs(model: str, produced: object, wanted: Sequence[str]) -> dict[str, np.ndarray]:
    """The arrays named in ``wanted`` from what model ``model`` produced.

    Raises ModelError naming the first output that is missing or is not a numpy array.
    """
    if not isinstance(produced, dict):  # the backends check this; guard the lookups below
        raise ModelError(f"model {model!r}: infer() returned {type(produced).__name__}")
    picked = {}
    for name in wanted:
        if name not in produced:
            raise ModelError(
                f"model {model!r} did not return output {name!r}; it returned "
                f"{sorted(map(str, produced))}"
            )
        array = produced[name]
        if not isinstance(array, np.ndarray):
            raise ModelError(
                f"model {model!r} returned {type(array).__name__} for output {name!r}; "
                "expected numpy.ndarray"
            )
        picked[name] = array
    return picked


def output_names(
    model: str, asked: Sequence[str] | None, outputs: tuple[str, ...]
) -> tuple[str, ...]:
    """The outputs a request asks of model ``model`` (all of ``outputs`` when it names none),
    each once, in the order asked. Raises InvalidInput naming an output the model lacks.

    An empty list names none, as in Triton (HTTP ``"outputs": []``; gRPC cannot tell an
    empty list from none): every output, not a request that runs the model for nothing."""
    if not asked:
        return outputs
    for name in asked:
        if name not in outputs:
            raise InvalidInput(
                triton.first(
                    triton.unexpected_output(model, name),
                    f"model {model!r} has no output {name!r}; its outputs are {', '.join(outputs)}",
                )
            )
    return tuple(dict.fromkeys(asked))
