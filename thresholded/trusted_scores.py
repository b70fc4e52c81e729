"""The cosine of results whose marks cannot be trusted, for the postprocessor and compressor.

The rule, the same in both adapters: a result this package's retriever produced for
this question (see :mod:`thresholded.provenance`) is judged by its marks. One it
produced for another question is judged by its cosine with this one, which needs the
model: its marks and its score are the other question's. Any other result is
judged by a cosine computed here, when the filter has an embedding model: the
question embedded once, the texts in one batch, as LangChain's ``EmbeddingsFilter``
does. Without a model, a score is read as a cosine only when the caller declared
``score_kind="cosine"``; a result with no score is dropped as ``unscored``; and a
call in which nothing at all can be judged is an error that says what to pass.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from thresholded.errors import NonCosineScoreError

__all__ = [
    "another_question_error",
    "cosines",
    "nothing_to_judge_error",
    "undeclared_score_error",
]


def cosines(query: Sequence[float], texts: Sequence[Sequence[float]]) -> list[float]:
    """The cosine between ``query`` and each vector of ``texts`` (0 for a zero vector)."""
    if not texts:
        return []
    q = np.asarray(query, dtype=np.float64)
    m = np.asarray(texts, dtype=np.float64)
    norms = np.linalg.norm(m, axis=1) * np.linalg.norm(q)
    dots = m @ q
    with np.errstate(divide="ignore", invalid="ignore"):
        values = np.where(norms > 0, dots / np.where(norms > 0, norms, 1.0), 0.0)
    return [float(v) for v in np.clip(values, -1.0, 1.0)]


def undeclared_score_error(owner: str, model_argument: str, score: float) -> NonCosineScoreError:
    """A raw score on a result this package did not produce, with no declared kind."""
    return NonCosineScoreError(
        f"{owner} got a result with score {score} that this package's retriever did not "
        "produce, so nothing says the score is a cosine (a Chroma distance, an L2 distance or "
        f"a reranker's score would be cut wrongly). Pass {model_argument}=... (the model the "
        "store was built with: the cosines are computed), or score_kind='cosine' if you know "
        "the scores are cosine similarities"
    )


def nothing_to_judge_error(owner: str, model_argument: str) -> NonCosineScoreError:
    """Results none of which carries a trusted mark or a score: the filter would do nothing."""
    return NonCosineScoreError(
        f"{owner} got results that carry no cosine it can trust: none was produced by this "
        "package's ThresholdedRetriever (marks written in metadata by anything else are "
        f"ignored) and none has a score. Pass {model_argument}=... (the model the store was "
        "built with) to compute the cosines, or retrieve with ThresholdedRetriever"
    )


def another_question_error(owner: str, model_argument: str) -> NonCosineScoreError:
    """Results retrieved for another question: their marks and scores are its cosines."""
    return NonCosineScoreError(
        f"{owner} got results that ThresholdedRetriever retrieved for another question: their "
        "similarity marks and scores are cosines with that question, not with this one (as "
        "after a retriever that rewords the question, such as LangChain's MultiQueryRetriever "
        f"or LlamaIndex's QueryFusionRetriever). Pass {model_argument}=... (the model the "
        "store was built with) to compute their cosines with this question"
    )
