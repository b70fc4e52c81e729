"""Attachments are fetched from the partitions searched (``milvus_partition_names``).

Milvus Lite 2.5 has no partitions, so this runs on Milvus Lite 3.x, which ``make``
installs apart from the venv's engine, in a process of its own. The scenario: one
document of three sections linked prev/next, ``pub-a`` (cosine 0.9) and ``pub-c``
(0.3) in the partition ``public``, ``int-b`` (0.2) and the parent summary
``int-summary`` in the partition ``internal``. The floor is 0.5: only ``pub-a`` is
kept, and its next neighbour and its parent are internal.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from processes import result_of

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
ML322 = Path(os.environ.get("THRESHOLDED_MILVUS_LITE_3") or ROOT / ".bench" / "milvus-lite-3.2.2")
"""Milvus Lite 3.x, installed apart from the venv's 2.5.1 by ``make``."""

SCRIPT = textwrap.dedent(
    """
    import json, math, sys
    from llama_index.core import VectorStoreIndex
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
    from llama_index_thresholded import ThresholdedRetriever
    from llama_index_thresholded.milvus import milvus_store
    from thresholded.policy import RetrievalPolicy

    folder, partitions = sys.argv[1], json.loads(sys.argv[2])

    def vec(cos, axis):
        v = [0.0] * 8
        v[0], v[axis] = cos, math.sqrt(1.0 - cos * cos)
        return v

    class Question(BaseEmbedding):
        def _get_query_embedding(self, query):
            return vec(1.0, 1)

        async def _aget_query_embedding(self, query):
            return vec(1.0, 1)

        def _get_text_embedding(self, text):
            raise AssertionError("every section carries its vector")

    def node(node_id, cos, axis, doc_type):
        return TextNode(id_=node_id, text=node_id, embedding=vec(cos, axis),
                        metadata={"doc_type": doc_type})

    summary = node("int-summary", 0.1, 4, "internal")
    linked = [node("pub-a", 0.9, 1, "public"), node("int-b", 0.2, 2, "internal"),
              node("pub-c", 0.3, 3, "public")]
    for i, section in enumerate(linked):
        relations = section.relationships
        relations[NodeRelationship.PARENT] = RelatedNodeInfo(node_id=summary.node_id)
        if i > 0:
            relations[NodeRelationship.PREVIOUS] = RelatedNodeInfo(node_id=linked[i - 1].node_id)
        if i + 1 < len(linked):
            relations[NodeRelationship.NEXT] = RelatedNodeInfo(node_id=linked[i + 1].node_id)

    store = milvus_store(f"{folder}/parts.db", "parts", dim=8)
    for name in ("public", "internal"):
        store.client.create_partition(store.collection_name, name)
    for section in [*linked, summary]:
        store.add([section], milvus_partition_name=section.metadata["doc_type"])
    index = VectorStoreIndex.from_vector_store(store, embed_model=Question(model_name="hand"))
    policy = RetrievalPolicy(min_similarity=0.5, max_per_source=None, max_chars=None)
    retriever = ThresholdedRetriever(index, policy, neighbours=1, pushdown=False,
                                     vector_store_kwargs={"milvus_partition_names": partitions})
    report = retriever.retrieve_with_report("question")
    print("RESULT " + json.dumps({
        "kept": sorted(n.node.node_id for n in report.kept),
        "items": sorted(n.node.node_id for n in report.items),
    }))
    """
)


def run(tmp_path: Path, partitions: list[str]) -> dict[str, list[str]]:
    args = ["-c", SCRIPT, str(tmp_path), json.dumps(partitions)]
    return result_of(args, path=[ML322, ROOT], timeout=300)


@pytest.mark.skipif(not (ML322 / "milvus_lite").is_dir(), reason=f"no milvus-lite 3.x in {ML322}")
def test_attachments_outside_the_partitions_searched_are_not_attached(tmp_path: Path) -> None:
    found = run(tmp_path, ["public"])
    assert found == {"kept": ["pub-a"], "items": ["pub-a"]}


@pytest.mark.skipif(not (ML322 / "milvus_lite").is_dir(), reason=f"no milvus-lite 3.x in {ML322}")
def test_attachments_inside_the_partitions_searched_are_attached(tmp_path: Path) -> None:
    found = run(tmp_path, ["public", "internal"])
    assert found == {"kept": ["pub-a"], "items": ["int-b", "int-summary", "pub-a"]}
