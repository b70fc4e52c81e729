"""The contract fixture: the same sections, in LlamaIndex and LangChain stores.

One fixture for every retriever: the same sections, in LlamaIndex and LangChain stores.

Two documents of linked sections, each with a summary held only in the docstore.
Every vector is a unit vector on a grid of sixteenths, so each cosine with the
question (the first axis) is exactly the one written here: a section at the floor
is at the floor. The fixture is built on in-memory stores (``SimpleVectorStore``,
``InMemoryVectorStore``) and on Milvus Lite (IP on unit vectors).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
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

QUESTION = "the question"
DIM = 6
FLOOR = 0.5


@dataclass(frozen=True)
class Section:
    id: str
    document: str
    cosine: float
    chars: int = 100


# Chains g0-g1-g2-g3-g4, f0-f1-f2-f3 and n0, each with its document's summary as parent.
SECTIONS = (
    Section("g0", "guide", 0.125),
    Section("g1", "guide", 0.875),
    Section("g2", "guide", 0.8125),
    Section("g3", "guide", 0.75),  # the guide's third: over the source cap
    Section("g4", "guide", 0.3125),  # below the floor
    Section("f0", "faq", 0.25),
    Section("f1", "faq", 0.6875, chars=900),  # over the character budget
    Section("f2", "faq", 0.625),
    Section("f3", "faq", 0.5625),  # the faq's second (f1 gave nothing): beyond top_k
    Section("n0", "notes", 0.5),  # exactly at the floor: kept by it, then beyond top_k
)
SUMMARIES = {"guide": "guide#summary", "faq": "faq#summary", "notes": "notes#summary"}

POLICY = RetrievalPolicy(
    min_similarity=FLOOR, top_k=3, over_fetch=4, max_per_source=2, max_chars=500
)
KEPT = ["g1", "g2", "f2"]
ATTACHED = ["guide#summary", "g0", "g3", "faq#summary", "f1", "f3"]
DROPPED = {
    "g3": "source_cap",
    "f1": "budget",
    "f3": "beyond_top_k",
    "n0": "beyond_top_k",
    "g4": "below_threshold",
    "f0": "below_threshold",
    "g0": "below_threshold",
}


def unit_vector(cosine: float) -> list[float]:
    """A unit vector whose cosine with the first axis is exactly ``cosine`` (in sixteenths)."""
    n = round(cosine * 16)
    assert n / 16 == cosine
    rest = 256 - n * n
    for a in range(16, -1, -1):
        for b in range(a, -1, -1):
            d_squared = rest - a * a - b * b
            d = math.isqrt(max(d_squared, 0))
            if d_squared >= 0 and d * d == d_squared and d <= b:
                return [n / 16, a / 16, b / 16, d / 16, 0.0, 0.0]
    for a in range(16, -1, -1):  # four squares always do
        for b in range(a, -1, -1):
            for c in range(b, -1, -1):
                d_squared = rest - a * a - b * b - c * c
                d = math.isqrt(max(d_squared, 0))
                if d_squared >= 0 and d * d == d_squared and d <= c:
                    return [n / 16, a / 16, b / 16, c / 16, d / 16, 0.0]
    raise AssertionError("unreachable")


def text_of(section: Section) -> str:
    return (section.id + " ").ljust(section.chars, ".")


VECTORS = {text_of(s): unit_vector(s.cosine) for s in SECTIONS}
VECTORS[QUESTION] = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]


def chain(document: str) -> list[Section]:
    return [s for s in SECTIONS if s.document == document]


def links(section: Section) -> tuple[str, str, str]:
    """prev, next and parent ids ("" for none)."""
    sections = chain(section.document)
    i = sections.index(section)
    prev = sections[i - 1].id if i > 0 else ""
    nxt = sections[i + 1].id if i + 1 < len(sections) else ""
    return prev, nxt, SUMMARIES[section.document]


# LlamaIndex ---------------------------------------------------------------------------------
class FixedEmbedding(BaseEmbedding):
    """The fixture's texts to their vectors; anything else is an error."""

    @classmethod
    def class_name(cls) -> str:
        return "FixedEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        return list(VECTORS[query])

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return list(VECTORS[query])

    def _get_text_embedding(self, text: str) -> list[float]:
        return list(VECTORS[text])

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return list(VECTORS[text])


def llama_nodes() -> tuple[list[TextNode], list[TextNode]]:
    sections = []
    for s in SECTIONS:
        node = TextNode(
            id_=s.id,
            text=text_of(s),
            metadata={"source": s.document},
            embedding=VECTORS[text_of(s)],
        )
        prev, nxt, parent = links(s)
        if prev:
            node.relationships[NodeRelationship.PREVIOUS] = RelatedNodeInfo(node_id=prev)
        if nxt:
            node.relationships[NodeRelationship.NEXT] = RelatedNodeInfo(node_id=nxt)
        node.relationships[NodeRelationship.PARENT] = RelatedNodeInfo(node_id=parent)
        node.excluded_embed_metadata_keys = ["source"]
        sections.append(node)
    summaries = [
        TextNode(id_=i, text=f"The {doc}: a summary.", metadata={"source": doc})
        for doc, i in SUMMARIES.items()
    ]
    return sections, summaries


def llama_index(store: Any) -> VectorStoreIndex:
    sections, summaries = llama_nodes()
    storage = StorageContext.from_defaults(vector_store=store)
    storage.docstore.add_documents(summaries)
    return VectorStoreIndex(sections, storage_context=storage, embed_model=FixedEmbedding())


# LangChain ----------------------------------------------------------------------------------
class FixedEmbeddings(Embeddings):
    def __eq__(self, other: object) -> bool:  # one model: every instance embeds alike
        return isinstance(other, FixedEmbeddings)

    def __hash__(self) -> int:
        return hash(FixedEmbeddings)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(VECTORS[t]) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return list(VECTORS[text])


def langchain_documents() -> list[Document]:
    docs = []
    for s in SECTIONS:
        prev, nxt, parent = links(s)
        metadata = {"source": s.document, "prev_id": prev, "next_id": nxt, "parent_id": parent}
        docs.append(Document(id=s.id, page_content=text_of(s), metadata=metadata))
    return docs


def langchain_docstore(documents: Sequence[Document]) -> InMemoryStore:
    docstore = InMemoryStore()
    summaries = [
        (i, Document(id=i, page_content=f"The {doc}: a summary.", metadata={"source": doc}))
        for doc, i in SUMMARIES.items()
    ]
    docstore.mset([*((d.id, d) for d in documents), *summaries])
    return docstore


def langchain_milvus(path: Path, documents: Sequence[Document]) -> Any:
    from langchain_thresholded.milvus import milvus_from_documents

    return milvus_from_documents(
        list(documents), FixedEmbeddings(), uri=str(path), collection_name="contract"
    )


@dataclass
class Fixture:
    """The fixture in one kind of store, for both adapters."""

    kind: str
    llama_index: VectorStoreIndex
    langchain_store: Any
    langchain_docstore: InMemoryStore
    langchain_uri: str = ""
    """Where the LangChain collection lives, on Milvus Lite."""
