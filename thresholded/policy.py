"""The retrieval policy: how many candidates to fetch, and which of them to keep."""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from thresholded.errors import PolicyFileError, ProfileError
from thresholded.files import DuplicateKeyError, atomic_write_text, loads_strict
from thresholded.models import ModelId, check_same_model, default_floor
from thresholded.strict import refuse_unknown_fields, unknown_field

MILVUS_MAX_TOP_K = 16_384

OTHER_NAMES = {
    "similarity_cutoff": "min_similarity",
    "score_threshold": "min_similarity",
    "k": "top_k",
    "similarity_top_k": "top_k",
}
"""The frameworks' names for policy fields: LlamaIndex's ``SimilarityPostprocessor``
cutoff and LangChain's ``score_threshold`` are the floor; LangChain's ``k`` and
LlamaIndex's ``similarity_top_k`` are ``top_k``."""
"""The most results one Milvus search may ask for (its ``topK`` limit)."""


def _percentage_hint(value: float) -> str:
    """A threshold between 2 and 100 was most likely meant as a percentage of 1 (one a
    little over 1 is no percentage a cosine floor would be written as)."""
    return f" (a percentage? write {value / 100:g})" if 2.0 <= value <= 100.0 else ""


class RetrievalPolicy(BaseModel):
    """Which retrieved sections may reach the reranker and the prompt.

    The search fetches ``top_k * over_fetch`` candidates, at most 16,384 (the most
    one Milvus search returns). Then, in this order: when even the best cosine is
    below ``min_top_similarity`` (the answer gate), nothing is kept; candidates
    whose cosine is below ``min_similarity`` are dropped, each source
    keeps at most ``max_per_source`` sections, sections that would overflow
    ``max_chars`` are skipped (one longer than the whole budget is never kept: a
    WARNING names it once), and the first ``top_k`` are kept. Neighbours and
    parent summaries are attached afterwards, for kept sections only; they do
    not count against ``top_k`` or ``max_chars`` but against their own
    ``max_attachment_chars``.

    A stored policy that lacks a field loads with that field's default; an
    unknown field or an invalid value is an error that names the field. Stored
    policies are read strictly (a JSON boolean is not a number, no field may
    appear twice) and written atomically.
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
            "gate, it must be calibrated (thresholded calibrate); one at or under "
            "min_similarity keeps what the floor alone keeps. Cosines only: hybrid "
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

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        """An unknown field names the field meant: a framework's name for it, or the
        nearest spelling."""
        refuse_unknown_fields(data, cls.model_fields, _unknown_field)
        return data

    @field_validator("min_similarity", "min_top_similarity", mode="before")
    @classmethod
    def _cosine_or_none(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy's too
            raise ValueError(f"must be a number in [-1, 1] or None, got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"must be finite, got {value!r}")
        if not -1.0 <= value <= 1.0:
            raise ValueError(
                f"is a cosine similarity and must lie in [-1, 1], got {value!r}"
                + _percentage_hint(value)
            )
        return float(value)

    @field_validator("max_per_source", "max_chars", "max_attachment_chars", mode="before")
    @classmethod
    def _zero_is_not_off(cls, value: Any) -> Any:
        if type(value) is int and value == 0:
            raise ValueError(
                "must be 1 or more, got 0: None in a policy lifts it (0 turns off the floor "
                "and the gate, but here it would keep nothing)"
            )
        return value

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

    @model_validator(mode="after")
    def _fetch_within_one_search(self) -> RetrievalPolicy:
        if self.fetch_k > MILVUS_MAX_TOP_K:
            raise ValueError(
                f"top_k x over_fetch = {self.top_k} x {self.over_fetch} = {self.fetch_k} "
                f"candidates per search, above {MILVUS_MAX_TOP_K:,}, the most one Milvus "
                "search returns (its topK limit): lower top_k or over_fetch"
            )
        return self

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
        return self.model_copy(update=changes)

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> RetrievalPolicy:
        """A copy with ``update``'s fields replaced (``None`` too), validated as the
        constructor validates them: an invalid value or an unknown field is an error
        naming it, never a policy that silently keeps nothing."""
        if not update:
            return super().model_copy(deep=deep)
        return type(self).model_validate({**self.model_dump(), **update})

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
        """A policy from its JSON text.

        Text that is not a JSON object, or names a field twice, is a
        ``PolicyFileError``; an unknown field or an invalid value is a
        ``ValidationError`` naming the field.
        """
        return cls.from_dict(_policy_object(text, what="the stored policy"))

    @classmethod
    def load(cls, path: str | Path) -> RetrievalPolicy:
        """Read a policy stored as JSON; a file that is not one is an error naming the file."""
        path = Path(path)
        try:
            text = path.read_bytes()
        except OSError as exc:
            raise PolicyFileError(f"policy file {path} cannot be read: {exc}") from exc
        data = _policy_object(text, what=f"policy file {path}")
        if "version" in data and "version" not in cls.model_fields:
            raise PolicyFileError(
                f"{path} is a calibration profile (it has a 'version'), not a stored policy: "
                "load it with RetrievalPolicy.from_profile(path), or "
                "ThresholdedRetriever(..., profile=path)"
            )
        return cls.from_dict(data)

    def save(self, path: str | Path) -> None:
        """Write the policy as JSON, atomically: a failed write leaves the old file as it was."""
        atomic_write_text(Path(path), json.dumps(self.to_dict(), indent=2) + "\n")

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
        from thresholded.profile import CalibrationProfile

        profile = CalibrationProfile.load(path)
        if collection is not None and profile.collection not in (None, collection):
            raise ProfileError(
                f"profile {path} was measured for collection {profile.collection!r}, "
                f"not {collection!r}: calibrate this collection (thresholded calibrate), or, "
                "if it holds the sections the profile was measured on, pass "
                f"collection={profile.collection!r}"
            )
        measured = {
            "min_similarity": profile.min_similarity,
            "min_top_similarity": profile.min_top_similarity,
            "embedding_model": profile.embedding_model,
        }
        _no_measured_field_replaced(path, measured, fields)
        given = {k: v for k, v in measured.items() if v is not None or k not in fields}
        return cls.model_validate({**fields, **given})


_MEASURED = ("min_similarity", "min_top_similarity", "embedding_model")
"""The policy fields a calibration profile gives."""


def unmeasured(policy: RetrievalPolicy) -> RetrievalPolicy:
    """``policy`` without the floor, gate and model a calibration profile gives: the base of
    a collection whose own profile gives them (a multi-collection retriever's policy is the
    default of a collection that has no profile)."""
    kept = {k: v for k, v in _set_fields(policy).items() if k not in _MEASURED}
    return RetrievalPolicy.model_validate(kept)


def _set_fields(policy: RetrievalPolicy) -> dict[str, Any]:
    """The fields a policy was given a value other than their default for."""
    defaults = RetrievalPolicy()
    return {
        key: value
        for key, value in policy.model_dump().items()
        if key in policy.model_fields_set and value != getattr(defaults, key)
    }


def _no_measured_field_replaced(
    path: str | Path, measured: dict[str, Any], fields: dict[str, Any]
) -> None:
    """Refuse a floor, gate or model given beside a profile that measured another one: one
    of the two would be silently dropped."""
    clashing = [
        f"{key}={fields[key]!r} (the profile's: {measured[key]!r})"
        for key in _MEASURED
        if key in fields
        and measured[key] is not None
        and not _same(key, fields[key], measured[key])
    ]
    if clashing:
        raise ValueError(
            f"the policy sets {', '.join(clashing)}, which profile {path} measured: give the "
            "floor, gate and model either in the policy or by the profile, not both (per call, "
            "min_similarity= and min_top_similarity= still override)"
        )


def _unknown_field(key: str) -> str:
    """What to write instead of the unknown policy field ``key``."""
    return unknown_field(key, RetrievalPolicy.model_fields, OTHER_NAMES)


def _same(key: str, given: Any, measured: Any) -> bool:
    """A field's two values agree: a model however it is spelled, else equal."""
    if key == "embedding_model":
        return ModelId.parse(given).same_model(ModelId.parse(measured))
    return given == measured


def profiled_policy(
    policy: RetrievalPolicy | None,
    profile: str | Path | None,
    *,
    collection: str | None = None,
    store_collection: str | None = None,
) -> RetrievalPolicy | None:
    """A collection's policy: ``policy``, or, given a calibration ``profile``, the profile's
    floor, answer gate and model with ``policy``'s other fields.

    ``collection`` names the profile's collection (default: ``store_collection``, the
    store's own collection name): a profile measured on another collection is refused.
    Both adapters' retrievers and collection specs resolve ``profile=`` here.
    """
    if profile is None:
        if collection is not None:
            raise ValueError(
                f"collection={collection!r} names the collection of a calibration profile: "
                "give profile=... too"
            )
        return policy
    fields = {} if policy is None else _set_fields(policy)
    scope = collection or store_collection
    if scope is None:
        from thresholded.profile import CalibrationProfile

        measured_on = CalibrationProfile.load(profile).collection
        if measured_on is not None:
            raise ProfileError(
                f"profile {profile} was measured for collection {measured_on!r}, and the store "
                "names no collection, so it cannot be checked that the profile is this "
                f"store's: pass collection={measured_on!r} to say it is"
            )
    return RetrievalPolicy.from_profile(profile, collection=scope, **fields)


def _policy_object(text: str | bytes, *, what: str) -> dict[str, Any]:
    """The JSON object a stored policy holds; anything else is a ``PolicyFileError``."""
    try:
        data = loads_strict(text)
    except DuplicateKeyError as exc:
        raise PolicyFileError(f"{what} is ambiguous: {exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PolicyFileError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise PolicyFileError(
            f"{what} holds a JSON {type(data).__name__}, not an object of policy fields"
        )
    return data


CALL_OVERRIDES = ("top_k", "max_per_source", "max_chars", "over_fetch")
"""The fields of the merged result's policy one call may replace (besides the whole policy,
and the floor and gate, which apply in every collection)."""


def call_policy(
    own: RetrievalPolicy,
    policy: object = None,
    *,
    named: Mapping[str, str] | None = None,
    **overrides: Any,
) -> RetrievalPolicy:
    """One call's policy: ``policy`` (a policy or its dict) in place of the retriever's
    ``own``, with the call's :data:`CALL_OVERRIDES` (None: as it is). ``named`` gives the
    keyword a call passes a field by, where it is not the field's name (LangChain's ``k``
    for ``top_k``): a value it refuses is named as the call gave it."""
    unknown = sorted(set(overrides) - set(CALL_OVERRIDES))
    if unknown:
        raise TypeError(f"a call cannot override {unknown}; it may: {list(CALL_OVERRIDES)}")
    try:
        return (policy_or_none(policy) or own).with_overrides(**overrides)
    except ValidationError as exc:
        if not any(_field_of(error) in (named or {}) for error in exc.errors()):
            raise
        raise _as_called(exc, overrides, named or {}) from exc


def _field_of(error: Mapping[str, Any]) -> Any:
    """The policy field a validation error is about; None for the whole policy."""
    return error["loc"][0] if error["loc"] else None


def _as_called(
    exc: ValidationError, overrides: Mapping[str, Any], named: Mapping[str, str]
) -> ValueError:
    """A refused override as the call gave it, e.g. ``k=0: Input should be greater than or
    equal to 1``, not the field's name, which the call does not take."""
    lines = []
    for error in exc.errors():
        field = _field_of(error)
        name = "the policy" if field is None else named.get(field, field)
        given = f"={overrides[field]!r}" if field in overrides else ""
        lines.append(f"{name}{given}: {error['msg']}")
    return ValueError("; ".join(lines))


def policy_or_none(value: object, *, what: str = "policy") -> RetrievalPolicy | None:
    """``value`` when it is a policy (or None); a mapping is read as a stored policy, as
    pydantic reads one (``{"min_similarity": 0.4}``); anything else is a clear error."""
    if value is None or isinstance(value, RetrievalPolicy):
        return value
    if isinstance(value, Mapping):
        return RetrievalPolicy.from_dict(dict(value))
    raise TypeError(
        f"{what} must be a RetrievalPolicy or its dict, got {type(value).__name__}; for a "
        "stored one use RetrievalPolicy.load(path)"
    )
