"""Translation between LangChain documents and the core's candidates.

Documents are copied before anything is written on them: the vector store's and
the docstore's objects are never mutated (``InMemoryVectorStore`` hands out its
own metadata dicts).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from langchain_core.documents import Document

from thresholded.copies import updated_copy
from thresholded.metadata_keys import remarked, source_from

_CONTENT_ID_PREFIX = "sha1:"


def stored_id(doc: Document, id_key: str | None = None) -> str | None:
    """The id the store gave a document: ``Document.id``, else ``metadata[id_key]``.

    langchain-milvus leaves ``Document.id`` empty and puts the primary key in the
    metadata, so the key is configurable.
    """
    if doc.id is not None and str(doc.id) != "":
        return str(doc.id)
    if id_key is not None:
        value = doc.metadata.get(id_key)
        if value is not None and str(value) != "":
            return str(value)
    return None


def document_id(doc: Document, id_key: str | None = None) -> str:
    """A document's identity: its stored id, else a hash of its text.

    Every candidate needs an id for de-duplication and for tying attachments to
    their section; two id-less documents with the same text are the same section.
    """
    found = stored_id(doc, id_key)
    if found is not None:
        return found
    digest = hashlib.sha1(doc.page_content.encode("utf-8"), usedforsecurity=False)
    return _CONTENT_ID_PREFIX + digest.hexdigest()


def source_of(doc: Document, source_key: str, doc_id: str) -> str:
    """The source the per-source cap counts: ``metadata[source_key]``, else the id."""
    return source_from(doc.metadata, source_key, doc_id) or doc_id


def marked_copy(doc: Document, marks: Mapping[str, Any], *, doc_id: str | None = None) -> Document:
    """A copy of ``doc`` with ``marks`` in a new metadata dict, the marks it held removed
    (:func:`~thresholded.metadata_keys.remarked`); ``doc`` is left as it was."""
    update: dict[str, Any] = {"metadata": remarked(doc.metadata, marks)}
    if doc.id is None and doc_id is not None and not doc_id.startswith(_CONTENT_ID_PREFIX):
        update["id"] = doc_id
    return updated_copy(doc, update)
