"""``search_kwargs={"ids": ...}`` is one id as a string or a list of ids; anything else is
refused with an error naming ``ids``.

``{"ids": 5}`` failed with a bare ``TypeError: 'int' object is not iterable``, which named
neither the argument nor what it takes; ``{"ids": {"a": 1}}`` was read as the ids of its keys.
"""

from __future__ import annotations

import pytest

from langchain_thresholded import ThresholdedRetriever
from thresholded import RetrievalPolicy

QUERY = "the question"
POLICY = RetrievalPolicy(min_similarity=0.5, top_k=10, max_per_source=None, max_chars=None)


def two(corpus):
    return corpus([("pub", 0.75, {"doc_type": "public"}), ("int", 0.75, {"doc_type": "internal"})])


@pytest.mark.parametrize("ids", [5, 2.5, {"a": 1}, b"ab", [None], [["a"]]], ids=repr)
def test_ids_that_are_no_list_of_ids_are_refused_naming_ids(corpus, ids):
    with pytest.raises(TypeError, match=r"search_kwargs\['ids'\] .*list of ids"):
        ThresholdedRetriever(
            vectorstore=two(corpus).store, policy=POLICY, search_kwargs={"ids": ids}
        )


@pytest.mark.parametrize("ids", ["pub", ["pub"], ("pub",), {"pub"}])
def test_one_id_or_a_collection_of_ids_is_taken(corpus, ids):
    kept = two(corpus)
    found = ThresholdedRetriever(
        vectorstore=kept.store, policy=POLICY, search_kwargs={"ids": ids}
    ).invoke(QUERY)
    assert [d.page_content for d in found] == ["pub"]


@pytest.mark.parametrize(("wrapped", "given"), [("pub", ["pub"]), (["pub"], "pub")])
def test_one_id_as_a_string_and_a_list_of_it_restrict_alike_in_from_retriever(
    corpus, wrapped, given
):
    """``from_retriever`` refused them as one replacing the other."""
    store = two(corpus).store
    retriever = ThresholdedRetriever.from_retriever(
        store.as_retriever(search_kwargs={"ids": wrapped}),
        policy=POLICY,
        search_kwargs={"ids": given},
    )
    assert [d.page_content for d in retriever.invoke(QUERY)] == ["pub"]
