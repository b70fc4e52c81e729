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
            page_content=f"{doc.title}: {doc.summary}",
            metadata={**doc.metadata, "id": doc.summary_id, "section": "summary"},
        )
        docstore.mset([(doc.summary_id, summary)])
        for i, section in enumerate(doc.sections):
            links = {
                "id": section.id,
                "parent_id": doc.summary_id,
                "prev_id": doc.sections[i - 1].id if i > 0 else "",
                "next_id": doc.sections[i + 1].id if i + 1 < len(doc.sections) else "",
            }
            sections.append(
                Document(
                    id=section.id, page_content=section.text, metadata={**section.metadata, **links}
                )
            )
    docstore.mset([(d.id, d) for d in sections if d.id])
    return sections, docstore
