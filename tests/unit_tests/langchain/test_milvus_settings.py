"""``langchain_thresholded.milvus``: ORM aliases per database, and the index a collection gets."""

from __future__ import annotations

import pytest

from langchain_thresholded.milvus import (
    DEFAULT_INDEX_TYPE,
    _ensure_orm_connection,
    _index_request,
    _orm_alias,
)
from thresholded.errors import UnsupportedMetricError
from thresholded.scores import Metric


def test_one_alias_per_server_token_and_database():
    laws = _orm_alias({"uri": "http://127.0.0.1:19530", "db_name": "laws"})
    faqs = _orm_alias({"uri": "http://127.0.0.1:19530", "db_name": "faqs"})
    other = _orm_alias({"uri": "http://10.0.0.2:19530", "db_name": "laws"})
    other_token = _orm_alias({"uri": "http://127.0.0.1:19530", "db_name": "laws", "token": "t"})
    assert len({laws, faqs, other, other_token}) == 4
    assert laws == _orm_alias({"uri": "http://127.0.0.1:19530", "db_name": "laws"})
    assert laws.startswith("thresholded-laws-")


def test_the_default_database_is_one_database_however_it_is_named():
    unnamed = _orm_alias({"uri": "http://127.0.0.1:19530"})
    assert unnamed == _orm_alias({"uri": "http://127.0.0.1:19530", "db_name": "default"})
    assert unnamed.startswith("thresholded-default-")


def test_stores_that_are_not_milvus_are_left_alone():
    class NotMilvus:
        alias = None

    store = NotMilvus()
    _ensure_orm_connection(store)
    assert store.alias is None


def test_a_new_collection_gets_an_exact_ip_index_by_default():
    assert _index_request(None, None) == (
        None,
        {"index_type": DEFAULT_INDEX_TYPE, "params": {}, "metric_type": "IP"},
    )


@pytest.mark.parametrize("metric", ["COSINE", "cosine", Metric.COSINE])
def test_the_metric_can_be_asked_for(metric):
    asked, params = _index_request(metric, None)
    assert asked is Metric.COSINE
    assert params["metric_type"] == "COSINE"


def test_index_params_keep_their_own_settings_and_metric():
    given = {"index_type": "HNSW", "params": {"M": 16}, "metric_type": "cosine"}
    asked, params = _index_request(None, given)
    assert asked is Metric.COSINE
    assert params == {"index_type": "HNSW", "params": {"M": 16}, "metric_type": "COSINE"}
    assert _index_request("IP", {"index_type": "HNSW"})[1]["metric_type"] == "IP"


@pytest.mark.parametrize(
    ("metric", "index_params"),
    [("HAMMING", None), (None, {"metric_type": "JACCARD"}), ("BM25", None)],
)
def test_a_metric_that_cannot_give_cosines_is_refused(metric, index_params):
    with pytest.raises(UnsupportedMetricError, match="cannot be read as cosine"):
        _index_request(metric, index_params)


def test_a_metric_that_contradicts_the_index_params_is_refused():
    with pytest.raises(ValueError, match="contradicts"):
        _index_request("IP", {"metric_type": "COSINE"})


def test_index_params_of_several_fields_are_refused():
    with pytest.raises(TypeError, match="one dense index"):
        _index_request(None, [{"metric_type": "IP"}, {"metric_type": "BM25"}])
