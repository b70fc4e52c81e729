"""``search_kwargs={"ids": ...}`` is one id as a string, or a list of ids: anything else
is refused when the retriever is built, naming the argument.

``{"ids": 5}`` failed with Python's bare "'int' object is not iterable"; a dict or bytes
were read as their keys or byte values, and every question then matched nothing.
"""

from __future__ import annotations

import pytest

from langchain_thresholded import ThresholdedRetriever
from thresholded import RetrievalPolicy
from thresholded.strict import search_ids

QUERY = "the question"
POLICY = RetrievalPolicy(min_similarity=0.5, top_k=10, max_per_source=None, max_chars=None)


def two(corpus):
    return corpus([("pub", 0.75, {}), ("5", 0.75, {})])


@pytest.mark.parametrize(
    ("ids", "said"),
    [
        (5, r"search_kwargs\['ids'\] takes a list of ids .*got int 5: write \[5\] for one"),
        (2.5, r"search_kwargs\['ids'\] takes a list of ids .*got float 2.5"),
        ({"pub": 1}, r"search_kwargs\['ids'\] takes a list of ids .*got dict"),
        (b"pub", r"search_kwargs\['ids'\] takes a list of ids .*got bytes"),
        ([["pub"]], r"search_kwargs\['ids'\] takes a list of ids .*values of type \['list'\]"),
        ([True], r"search_kwargs\['ids'\] takes a list of ids .*values of type \['bool'\]"),
        ([None], r"search_kwargs\['ids'\] takes a list of ids .*values of type \['NoneType'\]"),
    ],
    ids=["int", "float", "dict", "bytes", "nested", "bool", "none"],
)
def test_ids_that_are_no_list_of_ids_are_refused_when_built(corpus, ids, said):
    with pytest.raises(TypeError, match=said):
        ThresholdedRetriever(
            vectorstore=two(corpus).store, policy=POLICY, search_kwargs={"ids": ids}
        )


@pytest.mark.parametrize("ids", ["pub", ["pub"], ("pub",), {"pub"}])
def test_one_id_or_a_list_restricts_the_search(corpus, ids):
    retriever = ThresholdedRetriever(
        vectorstore=two(corpus).store, policy=POLICY, search_kwargs={"ids": ids}
    )
    assert [d.id for d in retriever.invoke(QUERY)] == ["pub"]


def test_whole_numbers_are_ids_as_a_milvus_int64_key_takes_them():
    assert search_ids([5, "a"], argument="ids") == ("5", "a")
    assert search_ids(None, argument="ids") is None


@pytest.mark.parametrize(("wrapped", "given"), [("pub", ["pub"]), (["pub"], "pub")])
def test_one_id_as_a_string_and_a_list_of_it_restrict_alike_in_from_retriever(
    corpus, wrapped, given
):
    """``from_retriever`` refused them as one replacing the other."""
    retriever = ThresholdedRetriever.from_retriever(
        two(corpus).store.as_retriever(search_kwargs={"ids": wrapped}),
        policy=POLICY,
        search_kwargs={"ids": given},
    )
    assert [d.id for d in retriever.invoke(QUERY)] == ["pub"]
