"""Public and internal sections in mixed documents, in both adapters' Milvus Lite stores.

Every text embeds to the same unit vector, so every section clears any floor: only
filters decide what comes back. The handbook mixes public and internal sections and
its summary is internal; the faq is public throughout; the ops notes are internal.
Summaries live only in the docstores (they are parent summaries, never searched).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

from thresholded import RetrievalPolicy

DIM = 4
VECTOR = [1.0, 0.0, 0.0, 0.0]
QUESTION = "How do I get my money back?"
PAYLOADS = json.loads((Path(__file__).parent / "payloads.json").read_text(encoding="utf-8"))
POLICY = RetrievalPolicy(
    min_similarity=0.1, top_k=20, over_fetch=2, max_per_source=None, max_chars=None
)


@dataclass(frozen=True)
class Section:
    id: str
    document: str
    doc_type: str


SECTIONS = (
    Section("h0", "handbook", "public"),
    Section("h1", "handbook", "internal"),
    Section("h2", "handbook", "public"),
    Section("h3", "handbook", "internal"),
    Section("f0", "faq", "public"),
    Section("f1", "faq", "public"),
    Section("o0", "ops", "internal"),
    Section("o1", "ops", "internal"),
)
SUMMARIES = {"handbook": "internal", "faq": "public", "ops": "internal"}
PUBLIC = {s.id for s in SECTIONS if s.doc_type == "public"} | {"faq#summary"}


def metadata(doc_type: str, document: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"doc_type": doc_type, "source": document, "tags": [doc_type]}
    if doc_type == "internal":
        meta["restricted_to"] = "staff"
    return meta


def links(section: Section) -> tuple[str, str, str]:
    chain = [s for s in SECTIONS if s.document == section.document]
    i = chain.index(section)
    prev = chain[i - 1].id if i > 0 else ""
    nxt = chain[i + 1].id if i + 1 < len(chain) else ""
    return prev, nxt, f"{section.document}#summary"


def related(section: Section) -> list[tuple[NodeRelationship, str]]:
    relations = (NodeRelationship.PREVIOUS, NodeRelationship.NEXT, NodeRelationship.PARENT)
    return list(zip(relations, links(section), strict=True))


class SameEmbedding(BaseEmbedding):
    @classmethod
    def class_name(cls) -> str:
        return "SameEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        return list(VECTOR)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return list(VECTOR)

    def _get_text_embedding(self, text: str) -> list[float]:
        return list(VECTOR)


class SameEmbeddings(Embeddings):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(VECTOR) for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return list(VECTOR)


def llama_index(store: Any) -> VectorStoreIndex:
    nodes = []
    for s in SECTIONS:
        node = TextNode(
            id_=s.id,
            text=f"{s.id} text",
            metadata=metadata(s.doc_type, s.document),
            embedding=list(VECTOR),
        )
        node.relationships.update(
            {relation: RelatedNodeInfo(node_id=target) for relation, target in related(s) if target}
        )
        nodes.append(node)
    summaries = [
        TextNode(id_=f"{doc}#summary", text=f"{doc} summary", metadata=metadata(kind, doc))
        for doc, kind in SUMMARIES.items()
    ]
    storage = StorageContext.from_defaults(vector_store=store)
    storage.docstore.add_documents(summaries)
    return VectorStoreIndex(nodes, storage_context=storage, embed_model=SameEmbedding())


def langchain_documents() -> list[Document]:
    docs = []
    for s in SECTIONS:
        prev, nxt, parent = links(s)
        meta = {**metadata(s.doc_type, s.document), "prev_id": prev, "next_id": nxt}
        docs.append(
            Document(id=s.id, page_content=f"{s.id} text", metadata={**meta, "parent_id": parent})
        )
    return docs


def langchain_docstore(documents: list[Document]) -> InMemoryStore:
    docstore = InMemoryStore()
    summaries = [
        (
            f"{doc}#summary",
            Document(
                id=f"{doc}#summary", page_content=f"{doc} summary", metadata=metadata(kind, doc)
            ),
        )
        for doc, kind in SUMMARIES.items()
    ]
    docstore.mset([*((d.id, d) for d in documents), *summaries])
    return docstore


def langchain_milvus(path: Path, documents: list[Document]) -> Any:
    from langchain_thresholded.milvus import milvus_from_documents

    return milvus_from_documents(
        documents, SameEmbeddings(), uri=str(path), collection_name="leaks"
    )
