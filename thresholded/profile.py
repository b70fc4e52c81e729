"""Calibration profiles: a measured floor and answer gate, with what they were measured on.

A profile is its own record, distinct from ``RetrievalPolicy``: it says which
thresholds were chosen for which collection, embedding model and metric, how
(mode and margin), when, and what the measurement showed. Profiles are written
atomically, so a crash never leaves a half-written one behind, and read
strictly: a JSON boolean is not a number, the version is an integer, the metric
is one Milvus scores can be read as cosines for, and no key appears twice. A
field the file lacks takes its default (``created``: None, not the time it is read);
the required ones are ``version``, ``min_similarity`` and ``embedding_model``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from thresholded.errors import ProfileError
from thresholded.files import DuplicateKeyError, atomic_write_text, loads_strict
from thresholded.models import ModelId
from thresholded.scores import Metric
from thresholded.strict import refuse_unknown_fields, unknown_field

__all__ = ["PROFILE_VERSION", "CalibrationProfile", "atomic_write_text"]

PROFILE_VERSION = 2
"""Version 2 stores the floor and the answer gate; version 1 stored the floor only."""
SUPPORTED_VERSIONS = frozenset({1, PROFILE_VERSION})

CalibrationMode = Literal["never-lose", "loss-budget", "separate", "manual"]


class CalibrationProfile(BaseModel):
    """A floor and a gate measured for one collection and one embedding model.

    A stored profile that lacks a field loads with that field's default: a
    version 1 profile loads with the gate off.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = Field(strict=True, description="Profile format version; required.")
    min_similarity: float = Field(
        ge=-1.0,
        le=1.0,
        allow_inf_nan=False,
        strict=True,
        description="The cosine floor of each candidate.",
    )
    min_top_similarity: float | None = Field(
        default=None,
        ge=-1.0,
        le=1.0,
        allow_inf_nan=False,
        strict=True,
        description="The answer gate on a question's best cosine; None: off (version 1).",
    )
    embedding_model: str = Field(description="Canonical model id, name@dimension.")
    metric: str = Field(default="IP", description="Index metric: IP, COSINE or L2.")
    collection: str | None = None
    """The collection it was measured on; None: not named."""
    corpus: str | None = None
    """What the questions and passages were, e.g. ``xquad-en``."""
    mode: CalibrationMode = "never-lose"
    """How the floor was chosen: keep every answering passage (``never-lose``), lose at
    most ``max_loss`` of them (``loss-budget``), the gap between the two distributions
    (``separate``), or set by hand (``manual``)."""
    margin: float | None = Field(default=None, strict=True)
    """How far below the lowest answering passage's cosine the floor was set."""
    gate_margin: float | None = Field(default=None, strict=True)
    """How far below the lowest answerable question's best cosine the gate was set."""
    max_loss: float | None = Field(default=None, strict=True)
    """The share of answering passages the ``loss-budget`` mode may lose."""
    created: str | None = Field(
        default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds")
    )
    """When it was measured (ISO 8601, UTC): now, for a new profile; None for a stored one
    that does not say (not the time it was loaded)."""
    provenance: str | None = None
    """Where the measurement came from: data, model, command."""
    measurements: dict[str, Any] = Field(default_factory=dict)
    """The measured table, suggestions and estimates behind the floor and the gate."""

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        """An unknown field names the field meant; a policy field says where it goes."""
        refuse_unknown_fields(data, cls.model_fields, _unknown_field)
        return data

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value not in SUPPORTED_VERSIONS:
            raise ValueError(
                f"profile version {value} is not supported "
                f"(supported: {sorted(SUPPORTED_VERSIONS)})"
            )
        return value

    @model_validator(mode="after")
    def _gate_needs_version_2(self) -> CalibrationProfile:
        if self.version < 2 and (self.min_top_similarity is not None or self.gate_margin):
            raise ValueError("a version 1 profile has no gate: write version 2 to store one")
        return self

    @field_validator("embedding_model")
    @classmethod
    def _canonical_model(cls, value: str) -> str:
        return str(ModelId.parse(value))

    @field_validator("metric")
    @classmethod
    def _known_metric(cls, value: str) -> str:
        return Metric.parse(value).value

    @property
    def model_id(self) -> ModelId:
        return ModelId.parse(self.embedding_model)

    @classmethod
    def load(cls, path: str | Path) -> CalibrationProfile:
        """Read a profile; a corrupt or unknown one is a ``ProfileError`` naming the file."""
        path = Path(path)
        try:
            raw = loads_strict(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ProfileError(f"calibration profile {path} does not exist") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ProfileError(f"calibration profile {path} is not valid JSON: {exc}") from None
        except DuplicateKeyError as exc:
            raise ProfileError(f"calibration profile {path} is ambiguous: {exc}") from None
        if not isinstance(raw, dict) or "version" not in raw:
            raise ProfileError(
                f"calibration profile {path} has no 'version': is it a profile? (a stored "
                "policy is loaded with RetrievalPolicy.load(path))"
            )
        try:
            return cls.model_validate({"created": None, **raw})
        except ValidationError as exc:
            raise ProfileError(f"calibration profile {path} is invalid: {exc}") from None

    def save(self, path: str | Path, *, force: bool = False) -> Path:
        """Write atomically; refuse to replace an existing profile unless ``force``."""
        path = Path(path)
        if path.exists() and not force:
            raise FileExistsError(f"{path} exists; pass force=True (--force) to overwrite it")
        text = json.dumps(self.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
        atomic_write_text(path, text)
        return path


def _unknown_field(key: str) -> str:
    """What to write instead of the unknown profile field ``key``: a policy field (``top_k``,
    LangChain's ``k``) is given beside the profile, not in it."""
    from thresholded.policy import OTHER_NAMES, RetrievalPolicy

    field = OTHER_NAMES.get(key, key)
    if field in RetrievalPolicy.model_fields and field not in CalibrationProfile.model_fields:
        return (
            f"{key!r} is a policy field, not a profile's: give it beside the profile, "
            f"RetrievalPolicy.from_profile(path, {field}=...)"
        )
    return unknown_field(key, CalibrationProfile.model_fields, OTHER_NAMES)
