"""The retrieval policy: how many candidates to fetch, and which of them to keep."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from thresholded.models import ModelId, check_same_model, default_floor


class RetrievalPolicy(BaseModel):
    """Which retrieved sections may reach the reranker and the prompt.

    The search fetches ``top_k * over_fetch`` candidates. Then, in this order:
    when even the best cosine is below ``min_top_similarity`` (the answer gate),
    nothing is kept; candidates whose cosine is below ``min_similarity`` are dropped, each source
    keeps at most ``max_per_source`` sections, sections that would overflow
    ``max_chars`` are skipped, and the first ``top_k`` are kept. Neighbours and
    parent summaries are attached afterwards, for kept sections only; they do
    not count against ``top_k`` or ``max_chars`` but against their own
    ``max_attachment_chars``.

    A stored policy that lacks a field loads with that field's default; an
    unknown field or an invalid value is an error that names the field.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    min_similarity: float | None = Field(
        default=None,
        description=(
            "Cosine floor. 0 keeps every result; None means the calibrated default of "
            "embedding_model (0.35 for BAAI/bge-m3; other models must be calibrated)."
        ),
    )
    min_top_similarity: float | None = Field(
        default=None,
        description=(
            "Answer gate: when the best cosine among the candidates that passed the filters "
            "is below it, nothing is kept. None or 0 turns it off; no model has a default "
            "gate, it must be calibrated (thresholded calibrate). Cosines only: hybrid "
            "results without a re-scored cosine do not count towards the best."
        ),
    )
    top_k: int = Field(default=4, ge=1, strict=True, description="Sections returned at most.")
    over_fetch: int = Field(
        default=3,
        ge=1,
        strict=True,
        description="The search fetches top_k * over_fetch candidates.",
    )
    max_per_source: int | None = Field(
        default=2,
        ge=1,
        strict=True,
        description="Sections one source may contribute; None: no cap.",
    )
    max_chars: int | None = Field(
        default=4000,
        ge=1,
        strict=True,
        description="Character budget of kept sections; None: none.",
    )
    max_attachment_chars: int | None = Field(
        default=None, ge=1, strict=True, description="Character budget of attachments; None: none."
    )
    source_key: str = Field(
        default="source", min_length=1, description="Metadata key naming a section's source."
    )
    embedding_model: str | None = Field(
        default=None, description="Canonical id (name@dimension) of the model the floor belongs to."
    )
    strict_score_kind: bool = Field(
        default=False,
        strict=True,
        description="Raise instead of passing through when a non-cosine score meets the floor.",
    )
    hybrid_policy: Literal["pass", "rescore"] = Field(
        default="pass",
        description=(
            "What the floor does with hybrid, sparse and other non-cosine results. "
            "'pass': never compared with the floor (they pass it untouched). 'rescore': "
            "compute each candidate's dense cosine with the question (stored vector, else "
            "embedded text) and apply the floor to that; the hybrid score and order stay."
        ),
    )

    @field_validator("min_similarity", "min_top_similarity", mode="before")
    @classmethod
    def _cosine_or_none(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"must be a number in [-1, 1] or None, got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"must be finite, got {value!r}")
        if not -1.0 <= value <= 1.0:
            raise ValueError(f"is a cosine similarity and must lie in [-1, 1], got {value!r}")
        return float(value)

    @field_validator("source_key")
    @classmethod
    def _source_key_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("embedding_model")
    @classmethod
    def _canonical_model(cls, value: str | None) -> str | None:
        return None if value is None else str(ModelId.parse(value))

    @property
    def fetch_k(self) -> int:
        """How many candidates the search asks for."""
        return self.top_k * self.over_fetch

    def resolve_min_similarity(self, model_in_use: ModelId | str | None = None) -> float:
        """The floor to apply: the set value, or the calibrated default of the model.

        When both this policy and the caller name a model, they must agree: a floor
        measured for one model means nothing for another.
        """
        if model_in_use is not None and self.embedding_model is not None:
            check_same_model(self.embedding_model, model_in_use, what="this policy's threshold")
        if self.min_similarity is not None:
            return self.min_similarity
        return default_floor(model_in_use if model_in_use is not None else self.embedding_model)

    def with_overrides(self, **overrides: Any) -> RetrievalPolicy:
        """A validated copy with some fields replaced; ``None`` values are ignored.

        Use it per call (``min_similarity``, ``top_k``, ...) without building a new
        retriever. To set a field to ``None`` on purpose, use ``model_copy``.
        """
        changes = {key: value for key, value in overrides.items() if value is not None}
        if not changes:
            return self
        return type(self).model_validate({**self.model_dump(), **changes})

    # Serialisation -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RetrievalPolicy:
        return cls.model_validate(data)

    def to_json(self, **kwargs: Any) -> str:
        return self.model_dump_json(**kwargs)

    @classmethod
    def from_json(cls, text: str | bytes) -> RetrievalPolicy:
        return cls.model_validate_json(text)

    @classmethod
    def load(cls, path: str | Path) -> RetrievalPolicy:
        """Read a policy stored as JSON."""
        return cls.from_json(Path(path).read_bytes())

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def from_profile(
        cls,
        path: str | Path,
        *,
        collection: str | None = None,
        **fields: Any,
    ) -> RetrievalPolicy:
        """A policy whose floor, gate and model come from a calibration profile.

        ``collection`` must match the profile's collection when both are named:
        a floor measured on one collection is not the floor of another.
        Other policy fields may be given as keyword arguments.
        """
        from thresholded.errors import ProfileError
        from thresholded.profile import CalibrationProfile

        profile = CalibrationProfile.load(path)
        if collection is not None and profile.collection not in (None, collection):
            raise ProfileError(
                f"profile {path} was measured for collection {profile.collection!r}, "
                f"not {collection!r}"
            )
        return cls.model_validate(
            {
                **fields,
                "min_similarity": profile.min_similarity,
                "min_top_similarity": profile.min_top_similarity,
                "embedding_model": profile.embedding_model,
            }
        )
