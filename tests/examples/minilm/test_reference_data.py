"""The reference covers what it must: a truncated long text, an empty one, non-ASCII text."""

from __future__ import annotations

from tests.examples.minilm.reference import load_reference


def test_reference_covers_the_edge_cases() -> None:
    sentences, embeddings, data = load_reference()
    counts = data["untruncated_token_counts"]
    assert isinstance(counts, list)
    assert data["max_seq_length"] == 256
    assert max(counts) > 256  # one sentence is truncated by the tokenizer
    assert "" in sentences
    assert any(not s.isascii() for s in sentences)
    assert embeddings.shape == (len(sentences), 384)
    assert set(data["versions"]) >= {"torch", "sentence_transformers", "tokenizers"}  # type: ignore[arg-type]
