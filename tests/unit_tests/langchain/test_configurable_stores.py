"""What a retriever searches cannot be made configurable: a call's config would replace it.

A retriever over the public store is restricted by that choice. With
``configurable_fields(collections=...)`` (or ``vectorstore=...``), a call's config
(``{"configurable": {"kbs": [internal_store]}}``) searched another store, and its documents
came back; a configured ``docstore`` attached from another docstore.
"""

from __future__ import annotations

import pytest
from langchain_core.runnables import ConfigurableField

from langchain_thresholded import MultiCollectionRetriever, ThresholdedRetriever
from thresholded import RetrievalPolicy

QUERY = "the question"
POLICY = RetrievalPolicy(min_similarity=0.5, top_k=10, max_per_source=None, max_chars=None)


@pytest.mark.parametrize("field", ["vectorstore", "docstore"])
def test_the_store_of_a_retriever_cannot_be_configurable(corpus, field):
    retriever = ThresholdedRetriever(vectorstore=corpus([("pub", 0.75)]).store, policy=POLICY)
    with pytest.raises(ValueError, match=rf"\['{field}'\] cannot be configurable.*call_filters"):
        retriever.configurable_fields(**{field: ConfigurableField(id="store")})


def test_the_collections_of_a_multi_collection_retriever_cannot_be_configurable(corpus):
    public = corpus([("pub", 0.75)]).store
    retriever = MultiCollectionRetriever(collections=[public], policy=POLICY)
    with pytest.raises(ValueError, match=r"\['collections'\] cannot be configurable"):
        retriever.configurable_fields(collections=ConfigurableField(id="kbs"))


def test_other_fields_stay_configurable(corpus):
    retriever = ThresholdedRetriever(vectorstore=corpus([("pub", 0.75)]).store, policy=POLICY)
    configurable = retriever.configurable_fields(policy=ConfigurableField(id="policy"))
    strict = {"configurable": {"policy": POLICY.with_overrides(min_similarity=0.9)}}
    assert configurable.invoke(QUERY, config=strict) == []
