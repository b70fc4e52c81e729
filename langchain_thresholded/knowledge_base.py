"""The markdown knowledge base as LangChain documents, with links for attachments.

Each section is a ``Document`` whose metadata names its neighbours and its
document's summary (``prev_id``, ``next_id``, ``parent_id``); the sections and
the summaries go into a docstore, from which ``ThresholdedRetriever`` attaches
them to kept sections.
"""

from __future__ import annotations

from langchain_core.documents import Document
from langchain_core.stores import InMemoryStore

from thresholded.knowledge_base import KnowledgeDocument


def knowledge_documents(documents: list[KnowledgeDocument]) -> tuple[list[Document], InMemoryStore]:
    """Section documents to index, and a docstore holding sections and summaries by id."""
    sections: list[Document] = []
    docstore = InMemoryStore()
    for doc in documents:
        summary = Document(
            id=doc.summary_id,
            page_content=doc.summary_text,
            metadata={**doc.summary_metadata, "id": doc.summary_id},
        )
        docstore.mset([(doc.summary_id, summary)])
        for section, prev, next_ in doc.linked_sections():
            links = {
                "id": section.id,
                "parent_id": doc.summary_id,
                "prev_id": prev or "",
                "next_id": next_ or "",
            }
            metadata = {**section.metadata, **links}
            sections.append(Document(id=section.id, page_content=section.text, metadata=metadata))
    docstore.mset([(d.id, d) for d in sections if d.id])
    return sections, docstore
