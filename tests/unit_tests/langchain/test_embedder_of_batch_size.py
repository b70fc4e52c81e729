"""``embedder_of`` embeds LangChain embeddings ``batch_size`` texts at a time, as LlamaIndex's."""

from __future__ import annotations

from langchain_core.embeddings import Embeddings

from langchain_thresholded.calibration import embedder_of


class _Counting(Embeddings):
    def __init__(self) -> None:
        self.batches: list[int] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(len(texts))
        return [[1.0, 0.0] for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return [0.0, 1.0]


def test_documents_are_embedded_batch_size_at_a_time():
    embeddings = _Counting()
    embedder = embedder_of(embeddings, "m@2", batch_size=2, progress=False)
    vectors = embedder.embed_documents(["a", "b", "c", "d", "e"])
    assert embeddings.batches == [2, 2, 1]
    assert vectors.shape == (5, 2)


def test_the_model_is_the_embeddings_own_unless_named():
    """``embedder_of(embeddings)`` was a ``TypeError`` (model_id missing) where the
    embeddings name their model, as the packaged ones do and as ``calibrate_vectorstore``
    reads it; LlamaIndex's ``embedder_of(embed_model)`` reads it from the model."""
    import pytest

    named = _Counting()
    named.model_id = "m@2"  # type: ignore[attr-defined]
    assert str(embedder_of(named, progress=False).model_id) == "m@2"
    assert str(embedder_of(named, "other@2", progress=False).model_id) == "other@2"
    with pytest.raises(ValueError, match=r"the embedding model: model_id=\.\.\. \(_Counting has"):
        embedder_of(_Counting(), progress=False)
