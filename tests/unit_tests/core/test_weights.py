"""bge-m3 is read from disk only, and a missing copy is the same clear error in both adapters."""

from __future__ import annotations

from pathlib import Path

import pytest

from thresholded import ModelWeightsNotFoundError
from thresholded.weights import BGE_M3_PATH_ENV, find_bge_m3, minilm_path


@pytest.fixture
def no_cached_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hugging Face cache and no variable: bge-m3 is nowhere on disk."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(BGE_M3_PATH_ENV, raising=False)
    return tmp_path


def _weights(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    return folder


def test_an_explicit_folder_with_the_weights_is_used(no_cached_copy):
    folder = _weights(no_cached_copy / "bge-m3")
    assert find_bge_m3(folder) == folder


def test_the_environment_variable_names_the_folder(no_cached_copy, monkeypatch):
    folder = _weights(no_cached_copy / "elsewhere")
    monkeypatch.setenv(BGE_M3_PATH_ENV, str(folder))
    assert find_bge_m3() == folder


def test_a_folder_named_on_purpose_is_that_folder_or_an_error(no_cached_copy, monkeypatch):
    """A misspelt path must not quietly load another copy of the weights."""
    monkeypatch.setenv(BGE_M3_PATH_ENV, str(_weights(no_cached_copy / "elsewhere")))
    with pytest.raises(ModelWeightsNotFoundError, match=r"typo.*holds no model"):
        find_bge_m3(no_cached_copy / "typo")


def test_weights_that_are_nowhere_are_an_error_that_says_where_to_put_them(no_cached_copy):
    with pytest.raises(ModelWeightsNotFoundError, match=rf"not on disk.*{BGE_M3_PATH_ENV}"):
        find_bge_m3()


@pytest.mark.parametrize("adapter", ["llama_index", "langchain"])
def test_both_adapters_load_bge_m3_from_disk_only(no_cached_copy, adapter):
    if adapter == "llama_index":
        from llama_index_thresholded.embeddings import load_embed_model as load
    else:
        from langchain_thresholded.embeddings import load_embeddings as load
    with pytest.raises(ModelWeightsNotFoundError, match="BAAI/bge-m3 are not on disk"):
        load("BAAI/bge-m3")
    with pytest.raises(ModelWeightsNotFoundError, match="missing holds no model"):
        load("BAAI/bge-m3", path=no_cached_copy / "missing")


def test_minilm_ships_in_its_package():
    assert (minilm_path() / "config.json").is_file()


@pytest.mark.parametrize("adapter", ["llama_index", "langchain"])
@pytest.mark.parametrize("name", ["minilm", "use-multilingual", "local folder"])
def test_a_path_is_refused_for_a_model_it_would_not_load(no_cached_copy, adapter, name):
    """path= names bge-m3's weights; for any other model it was ignored, and the packaged
    model loaded instead of the weights named."""
    if adapter == "llama_index":
        from llama_index_thresholded.embeddings import load_embed_model as load
    else:
        from langchain_thresholded.embeddings import load_embeddings as load
    if name == "local folder":
        name = str(_weights(no_cached_copy / "my-model"))
    with pytest.raises(ValueError, match=r"path= .*BAAI/bge-m3.*leave path= out"):
        load(name, path=_weights(no_cached_copy / "fine-tuned"))
