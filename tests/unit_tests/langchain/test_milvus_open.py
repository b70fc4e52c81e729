"""``ensure_orm_connection``: a store in a named database gets an ORM alias of its own."""

from __future__ import annotations

from langchain_thresholded.milvus import database_alias, ensure_orm_connection


def test_one_alias_per_server_token_and_database():
    laws = database_alias({"uri": "http://127.0.0.1:19530", "db_name": "laws"})
    faqs = database_alias({"uri": "http://127.0.0.1:19530", "db_name": "faqs"})
    other = database_alias({"uri": "http://10.0.0.2:19530", "db_name": "laws"})
    assert len({laws, faqs, other}) == 3
    assert laws == database_alias({"uri": "http://127.0.0.1:19530", "db_name": "laws"})
    assert laws.startswith("thresholded-laws-")


def test_stores_that_are_not_milvus_are_left_alone():
    class NotMilvus:
        alias = None

    store = NotMilvus()
    ensure_orm_connection(store)
    assert store.alias is None
