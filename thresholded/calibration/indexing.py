"""The text an index embeds for a passage, so calibration measures what the index holds.

Frameworks do not embed the same string for the same passage. LangChain's Milvus
store embeds a ``Document``'s ``page_content``: the passage text. LlamaIndex embeds a
``TextNode`` as ``get_content(MetadataMode.EMBED)``: a header of its metadata
(``source: ...``, ``lang: ...``) and then the text, which moves top scores by several
hundredths. Calibrating on the raw text then measures another index.

- ``text``: the passage text, as it is.
- ``langchain``: a ``Document`` with the passage text: the same string.
- ``llama-index``: a ``TextNode`` with the passage's metadata (``source``, ``lang``,
  ``group``, ``title``, whichever it has), embedded as ``MetadataMode.EMBED``.

A passage indexed without its metadata (as the example knowledge base is) is
measured with ``text``, or from its collection's stored vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

from thresholded.calibration.data import Passage

__all__ = ["INDEX_AS", "IndexAs", "llama_index_node", "passage_metadata", "passage_texts"]

IndexAs = Literal["text", "llama-index", "langchain"]
INDEX_AS: tuple[str, ...] = get_args(IndexAs)


def passage_metadata(passage: Passage) -> dict[str, str]:
    """The metadata an adapter stores with a passage: the fields the passage has."""
    fields = {
        "source": passage.source or passage.title or passage.pid,
        "lang": passage.lang,
        "group": passage.group,
        "title": passage.title,
    }
    return {key: value for key, value in fields.items() if value}


def llama_index_node(passage: Passage) -> Any:
    """The ``TextNode`` LlamaIndex indexes for a passage (needs llama-index-core)."""
    from llama_index.core.schema import TextNode

    return TextNode(id_=passage.pid, text=passage.text, metadata=passage_metadata(passage))


def passage_texts(passages: Sequence[Passage], index_as: IndexAs = "text") -> list[str]:
    """The strings the embedding model sees for ``passages`` under ``index_as``."""
    if index_as not in INDEX_AS:
        raise ValueError(f"unknown index_as {index_as!r}: use one of {', '.join(INDEX_AS)}")
    if index_as != "llama-index":
        return [p.text for p in passages]
    from llama_index.core.schema import MetadataMode

    return [llama_index_node(p).get_content(MetadataMode.EMBED) for p in passages]
