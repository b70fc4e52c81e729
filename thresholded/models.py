"""Embedding model identity and the thresholds measured for known models.

A cosine floor belongs to one model: 0.35 is a measurement on BAAI/bge-m3 and
means nothing for any other model. Models are named canonically, by their hub
name and dimension, so a local copy of a model is the same model as its name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from thresholded.errors import ModelMismatchError, UncalibratedModelError

_ALIASES = {
    "bge-m3": "BAAI/bge-m3",
    "baai/bge-m3": "BAAI/bge-m3",
    "all-minilm-l6-v2": "sentence-transformers/all-MiniLM-L6-v2",
    "sentence-transformers/all-minilm-l6-v2": "sentence-transformers/all-MiniLM-L6-v2",
    "minilm": "sentence-transformers/all-MiniLM-L6-v2",
    "use-multilingual": "google/universal-sentence-encoder-multilingual-3",
    "universal-sentence-encoder-multilingual-3": "google/universal-sentence-encoder-multilingual-3",
}

_ID_PATTERN = re.compile(r"^(?P<name>.+?)(?:@(?P<dim>\d+))?$")


@dataclass(frozen=True)
class ModelId:
    """A model's canonical name and, where known, its dimension: ``name@dim``."""

    name: str
    """The canonical name, e.g. ``BAAI/bge-m3``."""
    dimension: int | None = None
    """The vectors' dimension; None: not known."""

    def __str__(self) -> str:
        return self.name if self.dimension is None else f"{self.name}@{self.dimension}"

    @classmethod
    def parse(cls, text: str | ModelId) -> ModelId:
        """Read ``name`` or ``name@dim``; a local directory becomes its model's name."""
        if isinstance(text, ModelId):
            return text
        text = text.strip()
        if not text:
            raise ValueError("an embedding model id must not be empty")
        match = _ID_PATTERN.match(text)
        assert match is not None  # the pattern matches any non-empty text
        dim = int(match["dim"]) if match["dim"] else None
        return cls(canonical_model_name(match["name"]), dim)

    def same_model(self, other: ModelId) -> bool:
        """The same name however it is spelled (:func:`same_name`), and the same dimension
        wherever both are known."""
        if not same_name(self.name, other.name):
            return False
        return (
            self.dimension is None or other.dimension is None or self.dimension == other.dimension
        )


def same_name(one: str, other: str) -> bool:
    """Whether two names spell one model: case aside, without Ollama's ``:latest`` tag or
    Google's ``models/`` prefix, and a bare name the same as ``org/name`` (the
    ``sentence-transformers/`` models are loaded by either)."""
    a, b = _spelling(one), _spelling(other)
    if a == b:
        return True
    if "/" in a and "/" in b:
        return False
    return a.rsplit("/", 1)[-1] == b.rsplit("/", 1)[-1]


def _spelling(name: str) -> str:
    return name.strip().lower().removesuffix(":latest").removeprefix("models/")


def canonical_model_name(name_or_path: str) -> str:
    """The hub name of a model, given that name, an alias or a local directory."""
    text = str(name_or_path).strip()
    path = Path(text)
    if path.is_dir():
        text = _name_from_directory(path)
    return _ALIASES.get(text.lower(), text)


def _name_from_directory(path: Path) -> str:
    """A local model directory is named by the Hugging Face cache folder it is in
    (``models--BAAI--bge-m3/snapshots/<hash>``), else by its model card, else by its folder.

    ``config.json``'s ``_name_or_path`` often names the base model a checkpoint was
    fine-tuned from, so it is only the last resort.
    """
    cached = _HUB_CACHE.search(str(path))
    if cached:
        return f"{cached['org']}/{cached['name']}"
    card = path / "README.md"
    if card.is_file():
        text = card.read_text(encoding="utf-8", errors="replace")
        loaded = _CARD_LOAD.search(text)
        if loaded:
            return loaded["name"]
        heading = _CARD_HEADING.search(text)
        if heading:
            return heading["name"].strip()
    if path.name not in _GENERIC_FOLDERS:
        return path.name
    config = path / "config.json"
    if config.is_file():
        try:
            value = json.loads(config.read_text(encoding="utf-8")).get("_name_or_path")
        except (OSError, ValueError):
            value = None
        if isinstance(value, str) and value and not Path(value).is_absolute():
            return value
    return path.parent.name


_CARD_LOAD = re.compile(r"SentenceTransformer\(\s*['\"](?P<name>[\w.\-]+/[\w.\-]+)['\"]")
_CARD_HEADING = re.compile(r"^# (?P<name>[\w.\-/]+)\s*$", re.MULTILINE)
_GENERIC_FOLDERS = {"model", "models", "snapshot", "weights"}
_HUB_CACHE = re.compile(r"models--(?P<org>[\w.\-]+)--(?P<name>[\w.\-]+)")
"""A Hugging Face cache folder (``models--BAAI--bge-m3/snapshots/<hash>``) names its model."""


@dataclass(frozen=True)
class KnownFloor:
    """A threshold measured for a model, with where the number comes from."""

    model: ModelId
    min_similarity: float
    metric: str
    provenance: str


KNOWN_FLOORS: dict[str, KnownFloor] = {
    "BAAI/bge-m3": KnownFloor(
        model=ModelId("BAAI/bge-m3", 1024),
        min_similarity=0.35,
        metric="IP on unit vectors (cosine)",
        provenance=(
            "Measured on Milvus with IP on unit vectors: the answering passages of English "
            "and German questions over English test documents and German law collections "
            "scored 0.437-0.77; the best results of unrelated questions scored 0.28-0.43. "
            "0.35 leaves a margin of 0.087 under the lowest answering passage. The ranges "
            "overlap, so 0.35 drops what is clearly unrelated and leaves the rest to the reranker."
        ),
    ),
}


def default_floor(model: ModelId | str | None) -> float:
    """The built-in floor of ``model`` (a name or id), or an error that says to calibrate."""
    if model is None:
        raise UncalibratedModelError(
            "min_similarity=None means 'the calibrated default of the embedding model', but "
            "no embedding model is known here. Set RetrievalPolicy(embedding_model=...), pass "
            "a calibration profile, or set the floor explicitly: "
            "policy=RetrievalPolicy(min_similarity=...) (0 keeps every result)."
        )
    model_id = ModelId.parse(model) if isinstance(model, str) else model
    known = KNOWN_FLOORS.get(model_id.name)
    if known is None:
        raise UncalibratedModelError(
            f"no threshold is known for the embedding model {model_id}: a cosine floor is a "
            "measurement of one model and cannot be borrowed from another. Calibrate it on your "
            "own questions (`thresholded calibrate`) and load the profile (profile=path), or "
            "set the floor explicitly: policy=RetrievalPolicy(min_similarity=...) (0 keeps "
            "every result)."
        )
    if not known.model.same_model(model_id):
        raise ModelMismatchError(
            f"the built-in floor of {known.model} does not fit {model_id}: the dimensions differ"
        )
    return known.min_similarity


def as_model_id(value: ModelId | str) -> ModelId:
    """A model id, or its name (``name`` or ``name@dimension``)."""
    return ModelId.parse(value) if isinstance(value, str) else value


def check_same_model(expected: ModelId | str, actual: ModelId | str, *, what: str) -> None:
    """Refuse to use a threshold measured for one model with another."""
    exp, act = as_model_id(expected), as_model_id(actual)
    if not exp.same_model(act):
        raise ModelMismatchError(
            f"{what} was measured for the embedding model {exp}, but {act} is in use: one "
            "model's cosine floor means nothing for another. Calibrate for this model, or "
            "override explicitly (allow_model_mismatch=True) if you know better."
        )


def check_named_model(expected: ModelId | str, *, what: str, where: str) -> None:
    """Refuse a threshold measured for a named model where no model is named at all.

    ``where`` names what should have named it (the embeddings, the store). Nothing can
    show that the vectors are the model's, and a floor means nothing for another model.
    """
    raise ModelMismatchError(
        f"{what} was measured for the embedding model {ModelId.parse(expected)}, but no "
        f"model is named by {where}, so nothing shows the vectors are that model's (a fake or "
        "another model's cosines would be cut at its floor). Use embeddings that name the "
        "model (e.g. a model_id or model_name), a policy without embedding_model and your "
        "own min_similarity, or allow_model_mismatch=True if you know the model is the same."
    )


def check_model_in_use(
    expected: ModelId | str | None, actual: ModelId | str | None, *, what: str, where: str
) -> None:
    """Refuse a threshold measured for ``expected`` when ``actual`` (the model that embeds,
    as ``where`` names it) is another model or no named model at all; no ``expected``: any."""
    if expected is None:
        return
    if actual is None:
        check_named_model(expected, what=what, where=where)
    else:
        check_same_model(expected, actual, what=what)


@dataclass(frozen=True)
class Embedder:
    """An embedding object as a multi-collection search sees it: ``what`` names it in
    messages, ``model`` is the model it names (None: it names none)."""

    what: str
    embeddings: object
    model: ModelId | str | None


def check_one_embedder(question: Embedder, collections: Sequence[Embedder], *, fix: str) -> None:
    """Refuse a collection whose sections may be another model's than the question's.

    The question is embedded once, by ``question``, and that vector searches every
    collection, each embedded by its own object. One embedded by the very same object,
    or by one that names the same model, is searched. Any other cannot be shown to hold
    the question's model's vectors: two unnamed models of one dimension give "cosines"
    that mean nothing, which the floor would keep or drop at random. ``fix`` says how to
    give every collection one model.
    """
    for collection in collections:
        if _same_object(collection.embeddings, question.embeddings) or _same_name(
            question.model, collection.model
        ):
            continue
        raise ModelMismatchError(
            f"{collection.what} was embedded with {_shown(collection)}, but the question is "
            f"embedded once, with {question.what} ({_shown(question)}), and that vector "
            "searches every collection: nothing shows the two are one model, and one model's "
            "question against another's sections gives cosines that mean nothing. "
            f"{fix}"
        )


def _same_name(one: ModelId | str | None, other: ModelId | str | None) -> bool:
    """Both name a model, and the same one."""
    if one is None or other is None:
        return False
    return as_model_id(one).same_model(as_model_id(other))


def _same_object(one: object, other: object) -> bool:
    """The same embedding object, or an equal one (a pydantic model's fields: e.g. two
    ``DeterministicFakeEmbedding(size=8)``); a comparison that fails is no proof."""
    if one is other:
        return True
    try:
        return bool(one == other)
    except Exception:
        return False


def _shown(embedder: Embedder) -> str:
    kind = type(embedder.embeddings).__name__
    return f"{kind}, naming no model" if embedder.model is None else f"{kind} ({embedder.model})"


def check_question_model(
    given: ModelId | str | None,
    built_with: ModelId | str | None,
    *,
    given_as: str,
    built: str = "the store was built with",
) -> None:
    """Refuse to embed with ``given`` (passed as ``given_as``) where the sections were
    embedded by another model, ``built_with`` (the store's, or the one the results were
    retrieved with): cosines across two models are meaningless. Where either names no
    model, nothing shows it."""
    if given is None or built_with is None:
        return
    mine, theirs = as_model_id(given), as_model_id(built_with)
    if not mine.same_model(theirs):
        raise ModelMismatchError(
            f"{given_as} is {mine}, but {built} {theirs}: one model's cosines cannot be "
            f"compared with another's. Pass that model ({theirs}), or "
            "allow_model_mismatch=True if you know they are the same."
        )
