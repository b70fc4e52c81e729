"""Model identity: canonical names, aliases, local directories, built-in floors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from thresholded import (
    KNOWN_FLOORS,
    ModelId,
    ModelMismatchError,
    UncalibratedModelError,
    default_floor,
)
from thresholded.models import canonical_model_name, check_same_model

# ModelId.parse ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name", "dim"),
    [
        ("BAAI/bge-m3", "BAAI/bge-m3", None),
        ("BAAI/bge-m3@1024", "BAAI/bge-m3", 1024),
        ("  BAAI/bge-m3@1024 ", "BAAI/bge-m3", 1024),
        ("org/some-model@64", "org/some-model", 64),
        ("org/some-model", "org/some-model", None),
        ("plain", "plain", None),
    ],
)
def test_parse_name_and_dimension(text: str, name: str, dim: int | None) -> None:
    model = ModelId.parse(text)
    assert model.name == name
    assert model.dimension == dim


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("bge-m3", "BAAI/bge-m3"),
        ("BGE-M3", "BAAI/bge-m3"),
        ("baai/bge-m3", "BAAI/bge-m3"),
        ("minilm", "sentence-transformers/all-MiniLM-L6-v2"),
        ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"),
        ("sentence-transformers/all-minilm-l6-v2", "sentence-transformers/all-MiniLM-L6-v2"),
        ("use-multilingual", "google/universal-sentence-encoder-multilingual-3"),
    ],
)
def test_aliases_map_to_hub_names(alias: str, canonical: str) -> None:
    assert ModelId.parse(alias).name == canonical
    assert ModelId.parse(f"{alias}@99") == ModelId(canonical, 99)
    assert canonical_model_name(alias) == canonical


def test_unknown_names_are_kept_as_given() -> None:
    assert ModelId.parse("Org/Mixed-Case").name == "Org/Mixed-Case"


@pytest.mark.parametrize("text", ["", "   ", "\n"])
def test_empty_id_is_an_error(text: str) -> None:
    with pytest.raises(ValueError, match="empty"):
        ModelId.parse(text)


def test_str_is_name_at_dimension() -> None:
    assert str(ModelId("BAAI/bge-m3", 1024)) == "BAAI/bge-m3@1024"
    assert str(ModelId("BAAI/bge-m3")) == "BAAI/bge-m3"
    assert ModelId.parse(str(ModelId("BAAI/bge-m3", 1024))) == ModelId("BAAI/bge-m3", 1024)


def test_model_id_is_frozen_and_hashable() -> None:
    model = ModelId("a/b", 3)
    with pytest.raises(AttributeError):
        model.name = "c/d"  # type: ignore[misc]
    assert {model, ModelId("a/b", 3)} == {model}


# same_model ------------------------------------------------------------------------------


def test_same_model() -> None:
    full = ModelId("BAAI/bge-m3", 1024)
    assert full.same_model(ModelId("BAAI/bge-m3", 1024))
    assert full.same_model(ModelId("BAAI/bge-m3"))
    assert ModelId("BAAI/bge-m3").same_model(full)
    assert not full.same_model(ModelId("BAAI/bge-m3", 768))
    assert not full.same_model(ModelId("sentence-transformers/all-MiniLM-L6-v2", 1024))
    assert not ModelId("BAAI/bge-m3").same_model(ModelId("baai/bge-m3-other"))


# Local directories -----------------------------------------------------------------------


def _model_dir(base: Path, folder: str, card: str | None = None, config: dict | None = None):
    path = base / folder
    path.mkdir(parents=True)
    if card is not None:
        (path / "README.md").write_text(card, encoding="utf-8")
    if config is not None:
        (path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return path


def test_local_directory_maps_to_the_model_card_name(tmp_path: Path) -> None:
    card = (
        "---\nlicense: mit\n---\n\n# Some fine model\n\n```python\n"
        "from sentence_transformers import SentenceTransformer\n"
        "model = SentenceTransformer('org/name')\n```\n"
    )
    path = _model_dir(tmp_path, "my-local-copy", card=card)
    model = ModelId.parse(str(path))
    assert model.name == "org/name"
    assert str(tmp_path) not in model.name
    assert ModelId.parse(f"  {path}  ").name == "org/name"


def test_local_directory_with_dimension(tmp_path: Path) -> None:
    path = _model_dir(tmp_path, "copy", card='model = SentenceTransformer("org/name")\n')
    assert ModelId.parse(f"{path}@512") == ModelId("org/name", 512)


def test_local_copy_of_bge_m3_is_bge_m3(tmp_path: Path) -> None:
    path = _model_dir(
        tmp_path, "snapshot-abc", card="model = SentenceTransformer( 'BAAI/bge-m3' )\n"
    )
    model = ModelId.parse(f"{path}@1024")
    assert model == ModelId("BAAI/bge-m3", 1024)
    assert default_floor(model) == 0.35
    # the card's name goes through the alias table too
    lower = _model_dir(tmp_path, "other", card="SentenceTransformer('baai/bge-m3')")
    assert ModelId.parse(str(lower)).name == "BAAI/bge-m3"


def test_local_directory_card_heading_is_second_choice(tmp_path: Path) -> None:
    path = _model_dir(tmp_path, "dl", card="# org/heading-model\n\nSome text.\n")
    assert ModelId.parse(str(path)).name == "org/heading-model"


def test_local_directory_without_card_is_named_by_its_folder(tmp_path: Path) -> None:
    path = _model_dir(tmp_path, "my-encoder", config={"_name_or_path": "base/model"})
    # the config names the base model a checkpoint was fine-tuned from: not used here
    assert ModelId.parse(str(path)).name == "my-encoder"


def test_generic_folder_falls_back_to_config(tmp_path: Path) -> None:
    path = _model_dir(tmp_path / "parent", "model", config={"_name_or_path": "org/from-config"})
    assert ModelId.parse(str(path)).name == "org/from-config"


def test_generic_folder_with_absolute_config_path_uses_parent(tmp_path: Path) -> None:
    path = _model_dir(tmp_path / "my-parent", "weights", config={"_name_or_path": "/abs/path"})
    assert ModelId.parse(str(path)).name == "my-parent"


def test_generic_folder_with_corrupt_config_uses_parent(tmp_path: Path) -> None:
    path = _model_dir(tmp_path / "the-parent", "model")
    (path / "config.json").write_text("{not json", encoding="utf-8")
    assert ModelId.parse(str(path)).name == "the-parent"


def test_a_path_that_is_not_a_directory_is_a_name(tmp_path: Path) -> None:
    missing = tmp_path / "does-not-exist"
    assert ModelId.parse(str(missing)).name == str(missing)


# default_floor ---------------------------------------------------------------------------


def test_known_floor_of_bge_m3() -> None:
    known = KNOWN_FLOORS["BAAI/bge-m3"]
    assert known.min_similarity == 0.35
    assert known.model == ModelId("BAAI/bge-m3", 1024)
    assert known.provenance


@pytest.mark.parametrize(
    "model",
    [
        "BAAI/bge-m3",
        "bge-m3",
        "BAAI/bge-m3@1024",
        ModelId("BAAI/bge-m3"),
        ModelId("BAAI/bge-m3", 1024),
    ],
)
def test_default_floor_of_bge_m3(model: str | ModelId) -> None:
    assert default_floor(model) == 0.35


def test_default_floor_refuses_another_dimension() -> None:
    with pytest.raises(ModelMismatchError) as info:
        default_floor("BAAI/bge-m3@768")
    assert "768" in str(info.value)


@pytest.mark.parametrize(
    "model", ["minilm", "org/unknown", "sentence-transformers/all-MiniLM-L6-v2@384"]
)
def test_default_floor_of_unknown_model_says_to_calibrate(model: str) -> None:
    with pytest.raises(UncalibratedModelError) as info:
        default_floor(model)
    message = str(info.value)
    assert "alibrate" in message
    assert str(ModelId.parse(model)) in message
    # where an explicit floor goes: the retrievers take no min_similarity= of their own
    assert "policy=RetrievalPolicy(min_similarity=" in message


def test_default_floor_without_model() -> None:
    with pytest.raises(UncalibratedModelError, match=r"policy=RetrievalPolicy\(min_similarity="):
        default_floor(None)


def test_uncalibrated_is_a_lookup_error() -> None:
    with pytest.raises(LookupError):
        default_floor("org/unknown")


# check_same_model ------------------------------------------------------------------------


def test_check_same_model_accepts_aliases_and_missing_dimension() -> None:
    check_same_model("bge-m3", "BAAI/bge-m3@1024", what="x")
    check_same_model(ModelId("BAAI/bge-m3", 1024), "BAAI/bge-m3", what="x")
    check_same_model("BAAI/bge-m3@1024", ModelId("BAAI/bge-m3", 1024), what="x")


def test_check_same_model_refuses_another_model() -> None:
    with pytest.raises(ModelMismatchError) as info:
        check_same_model("bge-m3", "minilm", what="the profile's floor")
    message = str(info.value)
    assert "the profile's floor" in message
    assert "BAAI/bge-m3" in message
    assert "sentence-transformers/all-MiniLM-L6-v2" in message


def test_check_same_model_refuses_another_dimension() -> None:
    with pytest.raises(ModelMismatchError):
        check_same_model("org/m@256", "org/m@512", what="x")


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("nomic-embed-text", "nomic-embed-text:latest"),
        ("all-mpnet-base-v2", "sentence-transformers/all-mpnet-base-v2"),
        ("BAAI/bge-small-en-v1.5", "baai/bge-small-en-v1.5"),
        ("models/text-embedding-004", "text-embedding-004"),
    ],
)
def test_one_model_spelled_two_ways_is_the_same_model(one: str, other: str) -> None:
    assert ModelId.parse(one).same_model(ModelId.parse(other))
    assert ModelId.parse(other).same_model(ModelId.parse(one))


def test_two_organisations_models_of_one_name_are_not_the_same() -> None:
    assert not ModelId.parse("acme/encoder").same_model(ModelId.parse("other/encoder"))
    assert not ModelId.parse("BAAI/bge-small-en-v1.5").same_model(ModelId.parse("BAAI/bge-m3"))


def test_a_hugging_face_cache_folder_names_its_model(tmp_path: Path) -> None:
    snapshot = tmp_path / "models--BAAI--bge-small-en-v1.5" / "snapshots" / "0123abc"
    path = _model_dir(
        snapshot.parent, snapshot.name, card="SentenceTransformer('BAAI/bge-large-zh-v1.5')"
    )
    assert ModelId.parse(str(path)).name == "BAAI/bge-small-en-v1.5"
