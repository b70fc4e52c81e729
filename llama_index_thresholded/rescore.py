"""Dense vectors of hybrid and sparse candidates, for ``hybrid_policy="rescore"``.

The cosine itself is computed by :mod:`thresholded.rescore`; this module only
finds each candidate's dense vector, as cheaply as it can, in one batch per step:

1. the vector the search returned on the node (``node.embedding``), if any;
2. the vector stored with it, read back with ``vector_store.get_nodes`` (Milvus
   returns the dense field as ``node.embedding``);
3. otherwise the candidate's text, embedded with the retriever's model in one
   batch, as the index embedded it (``MetadataMode.EMBED``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore

from thresholded.rescore import Vector, rescore, to_rescore
from thresholded.selection import Candidate

logger = logging.getLogger(__name__)


class DenseRescorer:
    """Gives hybrid and sparse candidates the dense cosine the floor is compared with.

    ``dimension`` is the dimension of the embedding model's vectors, when known: a
    stored vector of another dimension belongs to another model and is not used
    (the text is embedded instead).
    """

    def __init__(
        self,
        embed_model: BaseEmbedding,
        vector_store: object | None,
        *,
        dimension: int | None = None,
    ) -> None:
        self._embed_model = embed_model
        self._vector_store = vector_store
        self._dimension = dimension
        self._store_can_fetch = vector_store is not None and bool(
            getattr(vector_store, "stores_text", False) and hasattr(vector_store, "get_nodes")
        )

    def rescore(
        self, query: Vector, candidates: Sequence[Candidate[NodeWithScore]]
    ) -> list[Candidate[NodeWithScore]]:
        """The candidates, with ``cosine`` set on those whose score is not a cosine."""
        wanted = to_rescore(candidates)
        if not wanted:
            return list(candidates)
        vectors = self._on_nodes(wanted)
        missing = [c for c in wanted if c.id not in vectors]
        if missing and self._store_can_fetch:
            vectors.update(self._usable(self._fetch([c.id for c in missing])))
            missing = [c for c in wanted if c.id not in vectors]
        if missing:
            embedded = self._embed_model.get_text_embedding_batch(_texts(missing))
            vectors.update(zip((c.id for c in missing), embedded, strict=True))
        self._log(wanted, missing)
        return rescore(candidates, query, vectors)

    async def arescore(
        self, query: Vector, candidates: Sequence[Candidate[NodeWithScore]]
    ) -> list[Candidate[NodeWithScore]]:
        """Async ``rescore``: the store lookup and the embedding are awaited."""
        wanted = to_rescore(candidates)
        if not wanted:
            return list(candidates)
        vectors = self._on_nodes(wanted)
        missing = [c for c in wanted if c.id not in vectors]
        if missing and self._store_can_fetch:
            vectors.update(self._usable(await self._afetch([c.id for c in missing])))
            missing = [c for c in wanted if c.id not in vectors]
        if missing:
            embedded = await self._embed_model.aget_text_embedding_batch(_texts(missing))
            vectors.update(zip((c.id for c in missing), embedded, strict=True))
        self._log(wanted, missing)
        return rescore(candidates, query, vectors)

    # Finding vectors -------------------------------------------------------------------
    def _on_nodes(self, wanted: Sequence[Candidate[NodeWithScore]]) -> dict[str, Vector]:
        return self._usable({c.id: c.item.node.embedding for c in wanted})

    def _usable(self, found: dict[str, Vector | None]) -> dict[str, Vector]:
        """Vectors that exist and have the model's dimension."""
        return {
            node_id: vector
            for node_id, vector in found.items()
            if vector is not None
            and len(vector) > 0
            and (self._dimension is None or len(vector) == self._dimension)
        }

    def _fetch(self, ids: list[str]) -> dict[str, Vector | None]:
        try:
            nodes = self._vector_store.get_nodes(node_ids=ids)  # type: ignore[union-attr]
        except NotImplementedError:
            self._store_can_fetch = False
            return {}
        return _embeddings(nodes)

    async def _afetch(self, ids: list[str]) -> dict[str, Vector | None]:
        try:
            nodes = await self._vector_store.aget_nodes(node_ids=ids)  # type: ignore[union-attr]
        except NotImplementedError:
            self._store_can_fetch = False
            return {}
        return _embeddings(nodes)

    @staticmethod
    def _log(wanted: Sequence[Candidate], embedded: Sequence[Candidate]) -> None:
        logger.debug(
            "re-scored %d candidate(s) with the dense model: %d stored vector(s), %d embedded",
            len(wanted),
            len(wanted) - len(embedded),
            len(embedded),
        )


def _embeddings(nodes: Sequence[BaseNode]) -> dict[str, Vector | None]:
    return {node.node_id: node.embedding for node in nodes}


def _texts(candidates: Sequence[Candidate[NodeWithScore]]) -> list[str]:
    """The text each candidate was embedded from when it was indexed."""
    return [c.item.node.get_content(metadata_mode=MetadataMode.EMBED) for c in candidates]
