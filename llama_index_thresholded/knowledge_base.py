"""Index a markdown knowledge base as LlamaIndex nodes on a vector store.

Sections become nodes linked prev/next, each with its document's summary as
PARENT. A section is embedded as its own text (its heading included), without
its metadata, so every framework embeds the same string. Sections go into the
vector store; summaries go into the docstore, so they are never retrieved on
their own but can be attached to kept sections.
"""

from __future__ import annotations

from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import BasePydanticVectorStore

from thresholded.knowledge_base import KnowledgeDocument


def knowledge_nodes(documents: list[KnowledgeDocument]) -> tuple[list[TextNode], list[TextNode]]:
    """Section nodes (with prev/next/parent links) and summary nodes."""
    sections: list[TextNode] = []
    summaries: list[TextNode] = []
    for doc in documents:
        summary = TextNode(id_=doc.summary_id, text=doc.summary_text, metadata=doc.summary_metadata)
        summaries.append(summary)
        nodes = []
        for section, prev, next_ in doc.linked_sections():
            node = TextNode(
                id_=section.id,
                text=section.text,
                metadata=dict(section.metadata),
                excluded_embed_metadata_keys=list(section.metadata),
            )
            links = {
                NodeRelationship.PARENT: doc.summary_id,
                NodeRelationship.PREVIOUS: prev,
                NodeRelationship.NEXT: next_,
            }
            for relation, node_id in links.items():
                if node_id is not None:
                    node.relationships[relation] = RelatedNodeInfo(node_id=node_id)
            nodes.append(node)
        summary.relationships[NodeRelationship.CHILD] = [
            RelatedNodeInfo(node_id=n.node_id) for n in nodes
        ]
        sections.extend(nodes)
    return sections, summaries


def index_knowledge_base(
    documents: list[KnowledgeDocument],
    vector_store: BasePydanticVectorStore,
    embed_model: BaseEmbedding,
    *,
    show_progress: bool = False,
) -> VectorStoreIndex:
    """Embed and store the sections; keep the summaries in the docstore."""
    sections, summaries = knowledge_nodes(documents)
    storage = StorageContext.from_defaults(vector_store=vector_store)
    storage.docstore.add_documents(summaries)
    return VectorStoreIndex(
        sections, storage_context=storage, embed_model=embed_model, show_progress=show_progress
    )
