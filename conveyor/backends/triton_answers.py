"""A model that is not decoupled may answer through a response sender, as Triton allows.

Triton gives every request a response sender, decoupled or not. A model that is not
decoupled may answer a request by returning its response from ``execute``, or by sending it
with ``request.get_response_sender().send(response, flags=COMPLETE_FINAL)`` — before
``execute`` returns, or later from a thread or an asyncio task. The sender keeps Triton's
rules for such a model: at most one response, and no final flag before it.

:class:`OneAnswer` is the ``Responses`` such a sender writes to. The backend waits on it
for the requests ``execute`` left unanswered (it returned None for them), so a response sent
after ``execute`` returns still reaches its request. A request whose sender is freed
unanswered (the model kept neither it nor its request) fails at once instead of waiting.
"""

from __future__ import annotations

import threading

import numpy as np

from conveyor.errors import ModelError
from conveyor.triton import pb_utils

Answer = dict[str, np.ndarray] | Exception


class OneAnswer:
    """One request's answer, sent through the response sender of a non-decoupled model."""

    def __init__(self, model: str) -> None:
        self._model = model
        self._lock = threading.Lock()
        self._answered = threading.Event()
        self._answer: Answer | None = None
        self._closed = False

    @property
    def cancelled(self) -> bool:
        return False  # the request waits for its one answer; nothing cancels it midway

    @property
    def answered(self) -> bool:
        with self._lock:
            return self._answer is not None

    def send(self, outputs: dict[str, np.ndarray], final: bool = False) -> None:
        with self._lock:
            self._check_open()
            if self._answer is not None:
                raise pb_utils.TritonModelException(
                    "Unable to send response. Non-decoupled model cannot send more than one "
                    f"response (model {self._model!r})."
                )
            self._answer = outputs
        self._answered.set()

    def close(self, error: Exception | None = None) -> None:
        with self._lock:
            self._check_open()
            self._closed = True
            if error is None and self._answer is None:
                # Answer the request anyway, so it does not wait for a response that can
                # no longer come, then tell the model what it did wrong.
                self._answer = ModelError(
                    f"model {self._model!r}: Non-decoupled model cannot send complete final "
                    "before sending a response."
                )
                self._answered.set()
                raise pb_utils.TritonModelException(
                    "Unable to send response. Non-decoupled model cannot send complete final "
                    "before sending a response."
                )
            if self._answer is None:
                self._answer = error
        self._answered.set()

    def _check_open(self) -> None:
        if self._closed:
            raise pb_utils.TritonModelException(
                "Unable to send response. Response sender has been closed."
            )

    def answer_or(self, returned: Answer | None) -> Answer | None:
        """What the request is answered with once ``execute`` returned ``returned`` for it
        (None: nothing): a response sent already wins, as Triton's frontend keeps the first;
        else the returned one, which also closes the sender."""
        with self._lock:
            if self._answer is None and returned is not None:
                self._answer = returned
                self._closed = True
                self._answered.set()
            return self._answer

    def dropped(self) -> None:
        """The request's sender was freed: no response can come through it any more, and
        :meth:`wait` stops waiting (the request fails unless execute returned its answer)."""
        self._answered.set()

    def wait(self) -> Answer:
        """The answer, once the model sent it (possibly after ``execute`` returned)."""
        self._answered.wait()
        with self._lock:
            self._closed = True
            if self._answer is None:
                self._answer = ModelError(
                    f"model {self._model!r} answered a request with neither a response in "
                    "the list execute() returned nor one sent with "
                    "request.get_response_sender() (the request and its sender were "
                    "dropped); a model that is not decoupled answers every request once"
                )
            return self._answer

    def fail(self, error: Exception) -> Answer:
        """``execute`` raised: a response sent before stays the request's answer (Triton's
        frontend drops what follows the first); else the request fails with ``error``."""
        with self._lock:
            self._closed = True
            if self._answer is None:
                self._answer = error
                self._answered.set()
            return self._answer
