"""The one interface a backend implements: complete a config from a model file, load, run.

A backend is picked by name (``backend = "onnxruntime"`` in config.toml) from the registry in
``conveyor.backends``; the engine only ever talks to these two small classes.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from conveyor.futures import InferFuture
from conveyor.protocol.request import InferenceRequest, SequenceInfo
from conveyor.repository.config import ModelConfig


class ModelCaller(Protocol):
    """Submits a request to another model of the same engine (``Engine.submit_request``).

    Given to a backend at load, so model code can call other models (Triton's Business Logic
    Scripting) through the same queues and statistics as every other request, without the
    backend importing the engine.
    """

    def __call__(self, request: InferenceRequest) -> InferFuture: ...


@dataclasses.dataclass(frozen=True, slots=True)
class RequestData:
    """One request of a batch, for a model that takes a batch's requests one by one."""

    inputs: dict[str, np.ndarray]
    outputs: tuple[str, ...]
    request_id: str | None
    sequence: SequenceInfo | None = None
    # The request's own parameters (those the server does not read), as the client sent them.
    parameters: Mapping[str, object] = dataclasses.field(default_factory=dict)


# Output name -> where the caller wants that output's bytes: a writable, C-contiguous 1-D
# uint8 array (a slice of a client's shared-memory region; its size is the room there).
Destinations = Mapping[str, np.ndarray]


class Responses(Protocol):
    """Where a decoupled model sends the responses of one request (the engine's side)."""

    def send(self, outputs: dict[str, np.ndarray], final: bool = False) -> None:
        """One response; waits while the consumer is behind; Cancelled once it is gone.
        ``final``: it is the request's last (its ``close`` follows), sent as one with the
        final flag, as a BLS caller's iterator tells apart from a final flag sent alone."""

    def close(self, error: Exception | None = None) -> None:
        """The request is answered: no response follows (``error``: it failed)."""


class LoadedModel(abc.ABC):
    """One loaded copy of a model version.

    When ``thread_safe`` is true the engine loads the model once and calls ``run`` from all
    of the model's instance threads at once, so every instance shares the same weights.
    """

    thread_safe: bool = False
    # True: the engine calls ``run_requests`` with a batch's requests kept apart (no
    # concatenation), and each request may fail on its own.
    separate_requests: bool = False
    # > 0: the model runs asynchronously. The engine calls ``start`` instead of ``run`` and
    # keeps at most this many executions started and not yet done; the instance thread that
    # started one is free at once to take the next batch.
    max_in_flight: int = 0
    # False: each output goes back with the shape and datatype the model gave it, whatever
    # its config says (Triton's Python backend sends a tensor's own datatype and shape, and
    # Triton's core checks neither against the config, only that the output is declared).
    checks_outputs: bool = True

    @abc.abstractmethod
    def run(self, inputs: dict[str, np.ndarray], outputs: Sequence[str]) -> dict[str, np.ndarray]:
        """Run one (possibly batched) execution; return at least the named outputs."""

    def run_into(
        self, inputs: dict[str, np.ndarray], outputs: Sequence[str], destinations: Destinations
    ) -> dict[str, np.ndarray]:
        """``run``, for one request whose caller has room for some outputs already.

        A backend that can compute an output straight into its destination returns it as a
        view of the destination (the caller then sees it is already there and copies
        nothing); any other output is returned as ``run`` returns it. The default ignores
        ``destinations``.
        """
        return self.run(inputs, outputs)

    def start(
        self,
        inputs: dict[str, np.ndarray],
        outputs: Sequence[str],
        done: Callable[[dict[str, np.ndarray] | Exception], None],
    ) -> None:
        """Start one execution and return; ``done`` is called once with its outputs or error.

        Used instead of ``run`` when ``max_in_flight`` > 0. ``done`` may be called from any
        thread (a runtime's own completion thread); raising here fails the batch at once.
        """
        raise NotImplementedError(f"{type(self).__name__} does not run asynchronously")

    def run_requests(
        self, requests: Sequence[RequestData]
    ) -> list[dict[str, np.ndarray] | Exception]:
        """Run a batch request by request: one result (outputs, or that request's error) each.

        Called instead of ``run`` when ``separate_requests`` is true; raising fails them all.
        """
        raise NotImplementedError(f"{type(self).__name__} does not take separate requests")

    def run_stream(self, request: RequestData, responses: Responses) -> None:
        """Run one request of a decoupled model: ``responses.send`` each response, then
        ``responses.close()`` (now, or later from another thread, as Triton's senders may).

        Raising fails the request; a ``send`` that raises Cancelled means nobody reads any
        more, and the model should stop.
        """
        raise NotImplementedError(f"{type(self).__name__} does not answer with many responses")

    def run_streams(self, requests: Sequence[tuple[RequestData, Responses]]) -> None:
        """Run a batch of a decoupled model's requests, each with its own ``responses``.

        By default each on its own (``run_stream``); a model that takes a batch in one call
        (a Triton model's ``execute(requests)``) overrides it. A request that fails is
        closed with its error; the others go on."""
        for request, responses in requests:
            try:
                self.run_stream(request, responses)
            except Exception as exc:
                responses.close(exc)

    def forked(self, index: int, caller: ModelCaller | None) -> LoadedModel:
        """What worker process ``index`` (of process instances) runs, right after its fork.

        Most models run the zygote's loaded copy itself, shared copy-on-write. A model that
        gives every instance an object of its own (a Triton model) makes it here; the
        worker then ``close()``s it when it stops. ``caller`` reaches the engine's models
        from the worker.
        """
        return self

    def close(self) -> None:  # noqa: B027 - optional hook; most models need no cleanup
        """Release what ``load`` acquired."""


class Backend(abc.ABC):
    name: str

    def complete_config(self, config: ModelConfig, model: LoadedModel) -> ModelConfig:
        """Fill in what the config leaves out (inputs, outputs) from the loaded model itself."""
        return config

    @abc.abstractmethod
    def load(
        self, config: ModelConfig, version_dir: Path, *, caller: ModelCaller | None = None
    ) -> LoadedModel:
        """Load the model version in ``version_dir``; raise with a reason on failure.

        ``caller`` reaches the other models of the engine that loads this one (None where
        there is none, e.g. in a worker process).
        """
