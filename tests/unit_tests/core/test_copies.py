"""``updated_copy`` is pydantic's ``model_copy(update=...)``, and leaves the original alone."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.documents import Document
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from pydantic import BaseModel, ConfigDict, PrivateAttr

from thresholded.copies import updated_copy

KEYS = st.text(alphabet="abcdefgh_", min_size=1, max_size=6)
VALUES = st.one_of(st.integers(), st.text(max_size=8), st.floats(allow_nan=False), st.none())
METADATA = st.dictionaries(KEYS, VALUES, max_size=5)


def _same(copy: BaseModel, reference: BaseModel) -> None:
    assert type(copy) is type(reference)
    assert copy == reference
    assert copy.model_dump() == reference.model_dump()
    assert copy.model_fields_set == reference.model_fields_set
    assert copy.__pydantic_extra__ == reference.__pydantic_extra__
    assert copy.__pydantic_private__ == reference.__pydantic_private__


@given(METADATA, METADATA, st.text(max_size=20), st.lists(KEYS, max_size=3))
def test_a_node_copy_is_model_copy(
    stored: dict[str, Any], marks: dict[str, Any], text: str, excluded: list[str]
) -> None:
    node = TextNode(
        id_="n",
        text=text,
        metadata=stored,
        excluded_llm_metadata_keys=excluded,
        embedding=[0.6, 0.8],
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="d")},
    )
    before = node.model_dump()
    update = {"metadata": {**stored, **marks}, "embedding": None}
    copy = updated_copy(node, update)
    _same(copy, node.model_copy(update=update))
    assert copy is not node and copy.metadata is not node.metadata
    assert node.model_dump() == before  # the original is left as it was
    copy.text = "changed"  # assignment on the copy reaches neither the original...
    assert node.text == text
    assert "text" in copy.model_fields_set


@given(METADATA, METADATA, st.one_of(st.none(), st.text(min_size=1, max_size=5)))
def test_a_document_copy_is_model_copy(
    stored: dict[str, Any], marks: dict[str, Any], doc_id: str | None
) -> None:
    doc = Document(page_content="text", metadata=stored, id=doc_id)
    update = {"metadata": {**stored, **marks}}
    copy = updated_copy(doc, update)
    _same(copy, doc.model_copy(update=update))
    assert doc.metadata == stored


class _WithExtrasAndPrivates(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    size: int = 0
    _cache: dict[str, int] = PrivateAttr(default_factory=dict)


def test_extra_and_private_attributes_are_copied_not_shared() -> None:
    """A shallow copy, as ``model_copy`` makes: the copy's extras and private attributes
    can be set without touching the original's."""
    model = _WithExtrasAndPrivates(name="a", colour="red")
    model._cache["hits"] = 1
    copy = updated_copy(model, {"size": 3})
    _same(copy, model.model_copy(update={"size": 3}))
    copy._cache = {"hits": 2}
    copy.colour = "blue"  # type: ignore[attr-defined]
    assert model._cache == {"hits": 1}
    assert model.colour == "red"  # type: ignore[attr-defined]
    assert model.size == 0
