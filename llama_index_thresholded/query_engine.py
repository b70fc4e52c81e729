"""An "I don't know" path for query engines: no matching section, no LLM call.

``RetrieverQueryEngine`` turns an empty retrieval into "Empty Response", and a
chat engine answers from the model's own memory. When nothing cleared the
threshold, this engine returns a configured message instead, such as how to
reach a human, without calling the LLM.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from llama_index.core.base.response.schema import (
    RESPONSE_TYPE,
    AsyncStreamingResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle

DEFAULT_NO_MATCH_MESSAGE = "No relevant information found."
NOTHING_MATCHED = "nothing_matched"
"""Key in ``Response.metadata``: True when the message was returned without the LLM."""


class AbstainingQueryEngine(RetrieverQueryEngine):
    """A ``RetrieverQueryEngine`` that answers ``no_match_message`` when no node remains.

    The check runs after the node postprocessors (rerankers included), right
    before synthesis, so the LLM is only called when there is context.
    """

    def __init__(self, *args: Any, no_match_message: str = DEFAULT_NO_MATCH_MESSAGE, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.no_match_message = no_match_message

    @classmethod
    def from_args(  # type: ignore[override]
        cls, *args: Any, no_match_message: str = DEFAULT_NO_MATCH_MESSAGE, **kwargs: Any
    ) -> AbstainingQueryEngine:
        engine = super().from_args(*args, **kwargs)
        engine.no_match_message = no_match_message  # type: ignore[attr-defined]
        return engine  # type: ignore[return-value]

    def _no_match(self, *, asynchronous: bool = False) -> RESPONSE_TYPE:
        """The configured message, in the shape the synthesizer would have answered in."""
        metadata = {NOTHING_MATCHED: True}
        if not getattr(self._response_synthesizer, "_streaming", False):
            return Response(response=self.no_match_message, source_nodes=[], metadata=metadata)
        if asynchronous:
            return AsyncStreamingResponse(response_gen=self._agen(), metadata=metadata)
        return StreamingResponse(response_gen=iter([self.no_match_message]), metadata=metadata)

    async def _agen(self) -> AsyncGenerator[str, None]:
        yield self.no_match_message

    def synthesize(
        self,
        query_bundle: QueryBundle,
        nodes: list[NodeWithScore],
        additional_source_nodes: Any = None,
    ) -> RESPONSE_TYPE:
        if not nodes:
            return self._no_match()
        return super().synthesize(query_bundle, nodes, additional_source_nodes)

    async def asynthesize(
        self,
        query_bundle: QueryBundle,
        nodes: list[NodeWithScore],
        additional_source_nodes: Any = None,
    ) -> RESPONSE_TYPE:
        if not nodes:
            return self._no_match(asynchronous=True)
        return await super().asynthesize(query_bundle, nodes, additional_source_nodes)

    def _query(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        with self.callback_manager.event(
            CBEventType.QUERY, payload={EventPayload.QUERY_STR: query_bundle.query_str}
        ) as event:
            response = self.synthesize(query_bundle, self.retrieve(query_bundle))
            event.on_end(payload={EventPayload.RESPONSE: response})
        return response

    async def _aquery(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        with self.callback_manager.event(
            CBEventType.QUERY, payload={EventPayload.QUERY_STR: query_bundle.query_str}
        ) as event:
            response = await self.asynthesize(query_bundle, await self.aretrieve(query_bundle))
            event.on_end(payload={EventPayload.RESPONSE: response})
        return response
