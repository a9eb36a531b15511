"""The ``minilm_tokenizer`` model: TEXT (BYTES, UTF-8) -> input_ids, attention_mask (INT64).

Copied into the example repository as ``model.py`` beside ``tokenizer.json`` and
``sentence_bert_config.json``. It tokenizes as sentence-transformers does for this model:
[CLS] text [SEP], truncated to ``max_seq_length`` word pieces (the special tokens included),
padded to the longest text of the batch with [PAD] (id 0, mask 0).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from conveyor.errors import InvalidInput


class Model:
    thread_safe = True  # the tokenizer is configured once in load(); encoding does not mutate it

    version_dir: Any  # set by the Python backend before load()

    def load(self, config: Any) -> None:
        settings = json.loads((self.version_dir / "sentence_bert_config.json").read_text())
        self.max_seq_length = int(settings["max_seq_length"])
        tokenizer = Tokenizer.from_file(str(self.version_dir / "tokenizer.json"))
        # tokenizer.json ships truncation at 128 and fixed padding to 128; sentence-transformers
        # overrides both: truncate at max_seq_length, pad to the batch's longest.
        tokenizer.enable_truncation(max_length=self.max_seq_length)
        pad_id = tokenizer.token_to_id("[PAD]")
        tokenizer.enable_padding(pad_id=0 if pad_id is None else pad_id, pad_token="[PAD]")
        self.tokenizer = tokenizer

    def infer(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        texts = [_text(value, index) for index, value in enumerate(inputs["TEXT"].flat)]
        if not texts:
            empty = np.zeros((0, 0), dtype=np.int64)
            return {"input_ids": empty, "attention_mask": empty.copy()}
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([encoding.ids for encoding in encodings], dtype=np.int64)
        mask = np.array([encoding.attention_mask for encoding in encodings], dtype=np.int64)
        return {"input_ids": ids, "attention_mask": mask}


def _text(value: object, index: int) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"input 'TEXT' element {index} is not UTF-8: {exc}") from None
    raise InvalidInput(f"input 'TEXT' element {index} is {type(value).__name__}; expected BYTES")
