"""Milvus expression pieces: keys are identifiers, values are always literals."""

from __future__ import annotations

import pytest

from thresholded.milvus_expr import (
    UnsafeFilterError,
    check_expression,
    comparison,
    field_name,
    join,
    literal,
    membership,
    prefix_match,
)


@pytest.mark.parametrize("key", ["doc_type", "_x", "A1"])
def test_plain_keys_pass(key: str) -> None:
    assert field_name(key) == key


@pytest.mark.parametrize(
    "key",
    [
        'doc_type == "internal" or doc_type',
        "a b",
        "1abc",
        "",
        "x)",
        'x["a"]',
        "and",
        "NOT",
        None,
        3,
    ],
)
def test_other_keys_are_refused(key: object) -> None:
    with pytest.raises(UnsafeFilterError, match="plain field name"):
        field_name(key)


def test_allowed_keys() -> None:
    assert field_name("a", allowed={"a"}) == "a"
    with pytest.raises(UnsafeFilterError, match="allowed"):
        field_name("b", allowed={"a"})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("public", '"public"'),
        ("O'Brien", '"O\'Brien"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("end\\", '"end\\\\"'),
        ('") or (doc_type != "', '"\\") or (doc_type != \\""'),
        (3, "3"),
        (2.5, "2.5"),
        (True, "true"),
        (["a", 1], '["a", 1]'),
    ],
)
def test_literals(value: object, expected: str) -> None:
    assert literal(value) == expected


@pytest.mark.parametrize("value", ["a\nb", "a\rb", "a\x00", float("nan"), float("inf"), {"a": 1}])
def test_unwritable_values_are_refused(value: object) -> None:
    with pytest.raises(UnsafeFilterError):
        literal(value)


@pytest.mark.parametrize("value", ["bad\udc80", "\ud800", ["ok", "x\udfff"]])
def test_a_lone_surrogate_is_refused_naming_it(value: object) -> None:
    """Half a UTF-16 pair is not text: pymilvus would fail to encode it mid-request."""
    with pytest.raises(UnsafeFilterError, match=r"lone surrogate \(U\+D[89A-F][0-9A-F]{2}\)"):
        literal(value)
    with pytest.raises(UnsafeFilterError, match="lone surrogate"):
        prefix_match("title", "x\ud800")


def test_characters_beyond_the_basic_plane_are_text() -> None:
    assert literal("emoji \U0001f600") == '"emoji \U0001f600"'


def test_a_raw_expression_is_checked_for_lone_surrogates_only() -> None:
    expr = 'source == "billing" or title like "Grüße%" or tag == "\U0001f600"'
    assert check_expression(expr) == expr
    with pytest.raises(UnsafeFilterError, match=r"filter expression .*\(U\+DC80\)"):
        check_expression('source == "x\udc80"')


def test_composition() -> None:
    clause = comparison("doc_type", "==", "faq")
    assert clause == 'doc_type == "faq"'
    assert membership("k", ["a"], negate=True) == 'k not in ["a"]'
    assert prefix_match("k", "ab") == 'k like "ab%"'
    assert join([clause, "x > 1"], "or") == '(doc_type == "faq") or (x > 1)'
    assert join([clause], "not") == 'not ((doc_type == "faq"))'
    with pytest.raises(UnsafeFilterError):
        comparison("k", "== 1 or", 1)
    with pytest.raises(UnsafeFilterError):
        membership("k", "abc")
    with pytest.raises(UnsafeFilterError, match="wildcard"):
        prefix_match("k", "a%")
    with pytest.raises(UnsafeFilterError):
        join(["a"], "xor")
