"""Triton's words for the refusals its clients and tests match by text, in one place.

A refusal Triton's example clients or its own tests check by text begins with the sentence
Triton says for it (from its core and server sources), then ``": "`` and Conveyor's own
words, which say what was expected. Triton's request-validation messages start with
``[request id: …]``; that tag is left out here, as the tests match the sentence after it.
Pure string builders; statuses stay Conveyor's (see docs/errors.md).
"""

from __future__ import annotations

from collections.abc import Sequence


def first(triton: str, ours: str) -> str:
    """Triton's sentence, then Conveyor's detail."""
    return f"{triton}: {ours}"


def _names(names: Sequence[str]) -> str:
    # Triton's list form: ['INPUT0','INPUT1'] (no spaces), [] for none.
    return "[" + ",".join(f"'{name}'" for name in names) + "]"


def _dims(dims: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def input_count(
    model: str, inputs: int, required: Sequence[str], sent: Sequence[str], missing: Sequence[str]
) -> str:
    """Required inputs missing; ``inputs`` is how many the model declares."""
    if inputs == len(required):
        expected = f"expected {inputs} inputs"
    else:
        expected = f"expected number of inputs between {len(required)} and {inputs}"
    return (
        f"{expected} but got {len(sent)} inputs for model '{model}'. Got input(s) "
        f"{_names(sent)}, but missing required input(s) {_names(missing)}. Please provide "
        "all required input(s)."
    )


def input_repeated(name: str) -> str:
    return f"input '{name}' already exists in request"


def output_repeated(name: str) -> str:
    return f"output '{name}' already exists in request"


def unexpected_input(model: str, name: str) -> str:
    return f"unexpected inference input '{name}' for model '{model}'"


def unexpected_output(model: str, name: str) -> str:
    return f"unexpected inference output '{name}' for model '{model}'"


def input_datatype(model: str, name: str, got: str, expected: str) -> str:
    return (
        f"inference input '{name}' data-type is '{got}', but model '{model}' expects '{expected}'"
    )


def corrid_datatype(model: str, control: str, got: str, expected: str) -> str:
    """A sequence id of the other type than the model's CONTROL_SEQUENCE_CORRID input."""
    return (
        f"sequence batching control '{control}' data-type is '{got}', but model '{model}' "
        f"expects '{expected}'"
    )


def input_shape(model: str, name: str, expected: Sequence[int], got: Sequence[int]) -> str:
    """``expected`` with -1 for the batch dimension of a batching model, as Triton shows it."""
    return (
        f"unexpected shape for input '{name}' for model '{model}'. Expected {_dims(expected)}, "
        f"got {_dims(got)}"
    )


def batch_too_large(model: str, max_batch_size: int) -> str:
    return f"inference request batch-size must be <= {max_batch_size} for '{model}'"


def batch_disagrees(model: str, name: str) -> str:
    return f"input '{name}' batch size does not match other inputs for '{model}'"


def no_batch_dimension(model: str, name: str) -> str:
    return f"input '{name}' has no shape but model requires batch dimension for '{model}'"


def input_byte_size(model: str, name: str, expected: int, got: int) -> str:
    return (
        f"input byte size mismatch for input '{name}' for model '{model}'. Expected "
        f"{expected}, got {got}"
    )


def contents_with_raw(model: str, name: str) -> str:
    """gRPC: an input with typed ``contents`` in a request that uses raw_input_contents."""
    return (
        f"contents field must not be specified when using raw_input_contents for '{name}' "
        f"for model '{model}'"
    )


def contents_with_shared_memory(model: str, name: str) -> str:
    return (
        f"unexpected 'content' provided when using shared memory for input tensor '{name}' "
        f"for model '{model}'"
    )


def no_input_data(model: str, name: str) -> str:
    """gRPC: an input with no contents, no raw buffer and no shared-memory region."""
    return f"unable to find data for input tensor '{name}' for model '{model}' in request."


QUEUE_FULL = "Exceeds maximum queue size"
QUEUE_TIMEOUT = "Request timeout expired"


def region_registered(name: str) -> str:
    return f"shared memory region '{name}' already in manager"


def region_not_found(name: str) -> str:
    """A region named by an infer request or an unregister/status call is not registered."""
    return f"Unable to find shared memory region: '{name}'"


def system_region_not_found(name: str) -> str:
    """The status of one system shared-memory region that is not registered."""
    return f"Unable to find system shared memory region: '{name}'"


def region_too_small(name: str) -> str:
    """A registration whose offset + byte_size runs past the object's end."""
    return f"failed to register shared memory region '{name}': invalid args"


def region_cannot_open(key: str) -> str:
    return f"Unable to open shared memory region: '{key}'"


def region_offset(name: str) -> str:
    """A tensor's offset lies past its registered region's end."""
    return f"Invalid offset for shared memory region: '{name}'"


def region_range(name: str) -> str:
    """A tensor's offset + byte_size runs past its registered region."""
    return f"Invalid offset + byte size for shared memory region: '{name}'"
