"""Milvus expression pieces: keys are identifiers, values are always literals."""

from __future__ import annotations

import pytest

from thresholded.milvus_expr import (
    UnsafeFilterError,
    check_expression,
    field_name,
    id_membership,
    literal,
    membership,
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
        "doc_type\n",
        "and\n",
        "array_length",
        "ARRAY_LENGTH",
        "json_contains_any",
        None,
        3,
    ],
)
def test_other_keys_are_refused(key: object) -> None:
    with pytest.raises(UnsafeFilterError, match="field name"):
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


def test_characters_beyond_the_basic_plane_are_text() -> None:
    assert literal("emoji \U0001f600") == '"emoji \U0001f600"'


def test_a_raw_expression_is_checked_for_lone_surrogates_only() -> None:
    expr = 'source == "billing" or title like "Grüße%" or tag == "\U0001f600"'
    assert check_expression(expr) == expr
    with pytest.raises(UnsafeFilterError, match=r"filter expression .*\(U\+DC80\)"):
        check_expression('source == "x\udc80"')


def test_membership_of_ids() -> None:
    assert membership("doc_id", ["a", 'b"']) == 'doc_id in ["a", "b\\""]'
    with pytest.raises(UnsafeFilterError):
        membership("k", "abc")
    with pytest.raises(UnsafeFilterError):
        membership("k", [])


def test_id_membership_keeps_every_id_a_literal_and_leaves_out_impossible_ones() -> None:
    assert id_membership("id", ["x'] or id in ['", "b\\"]) == 'id in ["x\'] or id in [\'", "b\\\\"]'
    assert id_membership("id", ["a\nb", "c"]) == 'id in ["c"]'
    assert id_membership("id", ["a\nb", "\x00"]) is None
    assert id_membership("pk", ["5", "-7", "--5", "²", "١", "x", str(2**63)], integer=True) == (
        "pk in [5, -7]"
    )
