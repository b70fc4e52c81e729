"""One rule for the filters that judge results already retrieved: which policy is in force.

The LlamaIndex postprocessor and the LangChain compressor take the same arguments
and mean the same by them:

- ``policy=``: every rule of the policy (floor, answer gate, per-source cap,
  character budget, top_k);
- ``min_similarity=`` (with ``min_top_similarity=``, the answer gate, if wanted): the
  floor only, with no cap, no budget and no top_k;
- both: an error that names both;
- neither: the floor only, at the calibrated default floor of ``embedding_model``;
  without a model whose default floor is known, an error that says to pass
  ``min_similarity=`` or ``policy=``.

The policy in force always has its floor set, so it describes the filter entirely:
the same filter is built back from it with ``policy=``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from pydantic import ConfigDict, field_validator

from thresholded.models import KNOWN_FLOORS, ModelId, check_model_in_use, check_question_model
from thresholded.policy import MILVUS_MAX_TOP_K, RetrievalPolicy, policy_or_none
from thresholded.scores import ScoreKind
from thresholded.strict import StrictArguments

__all__ = ["FLOOR_ONLY", "PolicyInForce", "policy_in_force"]

FLOOR_ONLY: dict[str, Any] = {
    "top_k": MILVUS_MAX_TOP_K,
    "over_fetch": 1,
    "max_per_source": None,
    "max_chars": None,
}
"""The policy fields of a floor-only filter: no source cap, no budget, and a top_k of
16,384 (the most one search returns; a list longer than that is cut there)."""


def policy_in_force(
    owner: str,
    *,
    policy: RetrievalPolicy | Mapping[str, Any] | None,
    min_similarity: float | None,
    min_top_similarity: float | None,
    embedding_model: ModelId | str | None,
) -> RetrievalPolicy:
    """The policy a filter applies, from its constructor's arguments; ``owner`` names it.

    A mapping is read as a stored policy (what the filter's own serialisation holds).
    The floor of the result is always set: the policy's, else the calibrated default
    of ``embedding_model`` (or of the policy's model), which also becomes the
    policy's ``embedding_model`` when it names none.
    """
    if isinstance(policy, Mapping):
        policy = RetrievalPolicy.from_dict(dict(policy))
    policy = policy_or_none(policy)
    if policy is not None:
        also = [
            f"{name}="
            for name, value in (
                ("min_similarity", min_similarity),
                ("min_top_similarity", min_top_similarity),
            )
            if value is not None
        ]
        if also:
            raise TypeError(
                f"{owner} takes policy= or {' and '.join(also)}, not both: policy= applies "
                "every rule of the policy (floor, answer gate, per-source cap, character "
                "budget, top_k), min_similarity= the floor only. Put the floor in the policy: "
                "RetrievalPolicy(min_similarity=..., min_top_similarity=..., ...)"
            )
    elif min_similarity is None and embedding_model is None:
        known = ", ".join(str(floor.model) for floor in KNOWN_FLOORS.values())
        raise TypeError(
            f"{owner} needs a floor: pass min_similarity= (the floor only, e.g. "
            "min_similarity=0.35) or policy= (every rule of a RetrievalPolicy); or "
            f"embedding_model= a model whose default floor is known ({known})"
        )
    else:
        policy = RetrievalPolicy(
            min_similarity=min_similarity, min_top_similarity=min_top_similarity, **FLOOR_ONLY
        )
    floor = policy.resolve_min_similarity(embedding_model)
    changes: dict[str, Any] = {}
    if policy.min_similarity is None:
        changes["min_similarity"] = floor
    if policy.embedding_model is None and embedding_model is not None:
        changes["embedding_model"] = str(embedding_model)
    if not changes:
        return policy
    return RetrievalPolicy.model_validate({**policy.model_dump(), **changes})


class PolicyInForce(StrictArguments):
    """The constructor the postprocessor and the compressor share (a pydantic mixin, first
    among the bases): ``policy``, ``min_similarity`` and ``min_top_similarity`` become the
    policy in force (:func:`policy_in_force`), and the model that computes cosines, when
    there is one, must be the policy's, unless ``allow_model_mismatch``."""

    _init_keywords: ClassVar[tuple[str, ...]] = ("min_similarity", "min_top_similarity")
    model_config = ConfigDict(validate_assignment=True)
    """A field set afterwards is validated as the constructor validates it."""

    @field_validator("score_kind", mode="before")
    @classmethod
    def _parse_kind(cls, value: Any) -> Any:
        """A kind's name in any case; an unknown one is refused naming the kinds."""
        return ScoreKind.parse(value) if isinstance(value, str) else value

    def __init__(self, /, **data: Any) -> None:
        self._check_keywords(data)
        data["policy"] = policy_in_force(
            type(self).__name__,
            policy=data.get("policy"),
            min_similarity=data.pop("min_similarity", None),
            min_top_similarity=data.pop("min_top_similarity", None),
            embedding_model=data.get("embedding_model"),
        )
        super().__init__(**data)
        self._check_own_model()

    def __setattr__(self, name: str, value: Any) -> None:
        """Set a field, validated; a model (or ``allow_model_mismatch``) set afterwards is
        checked against the policy's model as the constructor checks it, and refused
        (the old value kept) when it fails."""
        before = getattr(self, name, None)
        super().__setattr__(name, value)
        try:
            self._check_own_model()
        except Exception:
            super().__setattr__(name, before)
            raise

    def _check_own_model(self) -> None:
        """The model that computes cosines must be the policy's, unless
        ``allow_model_mismatch``."""
        model = self._model_in_use()
        if model is not None and not getattr(self, "allow_model_mismatch", False):
            named, where = model
            check_model_in_use(
                self._policy_in_force().embedding_model,
                named,
                what="this policy's threshold",
                where=where,
            )

    @property
    def min_similarity(self) -> float:
        """The floor in force: ``policy.min_similarity``."""
        return self._policy_in_force().resolve_min_similarity()

    @property
    def min_top_similarity(self) -> float | None:
        """The answer gate in force (None or 0: off): ``policy.min_top_similarity``."""
        return self._policy_in_force().min_top_similarity

    def _policy_in_force(self) -> RetrievalPolicy:
        return getattr(self, "policy")  # noqa: B009  # the subclass's pydantic field

    def _check_marks_model(self, marks_models: Iterable[ModelId | None]) -> None:
        """Refuse the marks of results retrieved with another model than the floor's (the
        policy's model) or than the one this filter computes cosines with: one model's
        cosines mean nothing at another's floor, nor beside another's cosines."""
        if getattr(self, "allow_model_mismatch", False):
            return
        own = self._model_in_use()
        declared = getattr(self, "embedding_model", None)  # the caller names the model in use
        for marks_model in set(marks_models):
            if marks_model is not None or declared is None:
                check_model_in_use(
                    self._policy_in_force().embedding_model,
                    marks_model,
                    what="this policy's threshold",
                    where="the retriever that produced the results",
                )
            if own is not None:
                check_question_model(
                    own[0],
                    marks_model,
                    given_as=own[1],
                    built="the results were retrieved with the embedding model",
                )

    def _model_in_use(self) -> tuple[ModelId | str | None, str] | None:
        """The model that computes cosines (its id, or None when it names none) and how the
        class calls it; None when there is no such model."""
        return None
