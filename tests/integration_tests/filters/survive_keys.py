"""Engine survival, run in its own process: every refused key, through every public filter
path, raises ``UnsafeFilterError``, and the same Milvus Lite engine answers the next search.

Prints one line, ``RESULT <json>``: the paths, the keys, how many were refused, and
whether every search after them succeeded.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from langchain_core.structured_query import Comparator, Comparison
from leak_data import (
    DIM,
    POLICY,
    QUESTION,
    langchain_docstore,
    langchain_documents,
    langchain_milvus,
    llama_index,
)
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

import langchain_thresholded as lc
import llama_index_thresholded as li
from llama_index_thresholded.milvus import milvus_store
from thresholded.errors import UnsafeFilterError
from thresholded.filters import RESERVED_WORDS

KEYS = sorted({*RESERVED_WORDS, *(w.upper() for w in RESERVED_WORDS), "doc_type\n", "and\n"})


def main() -> None:
    folder = Path(tempfile.mkdtemp())
    index = llama_index(milvus_store(str(folder / "llama.db"), "survive", dim=DIM))
    documents = langchain_documents()
    store = langchain_milvus(folder / "langchain.db", documents)
    docstore = langchain_docstore(documents)
    single = li.ThresholdedRetriever(index, POLICY, pushdown=False)
    multi = li.MultiCollectionRetriever([li.CollectionSpec(index, name="kb")], POLICY)
    chain = lc.ThresholdedRetriever(vectorstore=store, policy=POLICY, docstore=docstore)
    chains = lc.MultiCollectionRetriever(
        collections=[lc.CollectionSpec(retriever=chain, name="kb")], policy=POLICY
    )

    def llama_filters(key: str) -> MetadataFilters:
        return MetadataFilters(filters=[MetadataFilter(key=key, value="public")])

    paths = {
        "llama_index per call": lambda k: single.retrieve_with_report(
            QUESTION, filters=llama_filters(k)
        ),
        "llama_index retriever filters": lambda k: li.ThresholdedRetriever(
            index, POLICY, filters=llama_filters(k)
        ),
        "llama_index from_retriever": lambda k: li.ThresholdedRetriever.from_retriever(
            index.as_retriever(filters=llama_filters(k)), POLICY
        ),
        "llama_index multi-collection per call": lambda k: multi.retrieve_with_report(
            QUESTION, filters=llama_filters(k)
        ),
        "langchain per call (dict)": lambda k: chain.invoke(QUESTION, filters={k: "public"}),
        "langchain per call (structured)": lambda k: chain.invoke(
            QUESTION, filters=Comparison(comparator=Comparator.EQ, attribute=k, value="public")
        ),
        "langchain retriever filters": lambda k: lc.ThresholdedRetriever(
            vectorstore=store, policy=POLICY, filters={k: "public"}
        ),
        "langchain multi-collection per call": lambda k: chains.invoke(
            QUESTION, filters={k: "public"}
        ),
    }
    refused = tried = searches = 0
    for path in paths.values():
        for key in KEYS:
            tried += 1
            try:
                path(key)
            except UnsafeFilterError:
                refused += 1
            searches += bool(single.retrieve(QUESTION)) and bool(chain.invoke(QUESTION))
    result = {
        "paths": sorted(paths),
        "keys": len(KEYS),
        "tried": tried,
        "refused": refused,
        "searches_after": searches,
    }
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
