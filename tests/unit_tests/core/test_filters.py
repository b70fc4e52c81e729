"""The filter model, its reference evaluator and its Milvus translation (no engine here)."""

from __future__ import annotations

import pytest

from thresholded.filters import (
    RESERVED_WORDS,
    Combine,
    Condition,
    DeclaredFields,
    Dialect,
    Group,
    Op,
    UnsafeFilterError,
    all_of,
    check_key,
    matches,
    none_match,
    to_milvus,
)
from thresholded.filters.milvus import ValueKind, value_kind

ROWS = {
    "string": {"k": "a"},
    "other_string": {"k": "b"},
    "number": {"k": 1},
    "list": {"k": ["a", "c"]},
    "empty_list": {"k": []},
    "empty_string": {"k": ""},
    "missing": {},
    "null": {"k": None},
}


def matching(f: object) -> set[str]:
    return {name for name, row in ROWS.items() if matches(f, row)}  # type: ignore[arg-type]


def c(op: Op, value: object = None, key: str = "k") -> Condition:
    return Condition(key, op, value)  # type: ignore[arg-type]


# The reference -------------------------------------------------------------------------------
def test_not_means_none_of() -> None:
    internal = Group(Combine.NOT, (c(Op.EQ, "a"), c(Op.EQ, "b")))
    assert matching(internal) == set(ROWS) - {"string", "other_string"}


def test_ne_and_nin_hold_where_the_key_is_missing() -> None:
    assert {"missing", "null"} <= matching(c(Op.NE, "a"))
    assert {"missing", "null"} <= matching(c(Op.NIN, ["a"]))
    assert "string" not in matching(c(Op.NE, "a"))


def test_a_type_mismatch_does_not_match() -> None:
    assert matching(c(Op.EQ, "1")) == set()
    assert matching(c(Op.EQ, 1)) == {"number"}
    assert matching(c(Op.GT, 0)) == {"number"}
    assert matching(c(Op.GT, "")) == {"string", "other_string"}
    assert "number" in matching(c(Op.NE, "1"))  # the complement of EQ


def test_text_match_is_a_substring() -> None:
    assert matches(c(Op.TEXT_MATCH, "ab"), {"k": "xaby"})
    assert not matches(c(Op.TEXT_MATCH, "ab"), {"k": ["ab"]})


def test_is_empty() -> None:
    assert matching(c(Op.IS_EMPTY)) == {"empty_list", "empty_string", "missing", "null"}


def test_lists() -> None:
    assert matching(c(Op.CONTAINS, "a")) == {"list", "string"}  # "a" in "a", as LlamaIndex
    assert matching(c(Op.ANY, ["x", "c"])) == {"list"}
    assert matching(c(Op.ALL, ["a", "c"])) == {"list"}
    assert matching(c(Op.IN, [])) == set()
    assert matching(c(Op.NIN, [])) == set(ROWS)


def test_list_tests_look_for_text_in_a_stored_string() -> None:
    tags = {"k": "faq,internal"}
    assert matches(c(Op.CONTAINS, "internal"), tags)
    assert matches(c(Op.ANY, ["secret", "faq"]), tags)
    assert matches(c(Op.ALL, ["faq", "internal"]), tags)
    assert not matches(c(Op.ALL, ["faq", "secret"]), tags)
    assert not matches(Group(Combine.NOT, (c(Op.CONTAINS, "internal"),)), tags)
    assert not matches(c(Op.CONTAINS, 1), {"k": "1"})  # a number is not text


@pytest.mark.parametrize("dialect", list(Dialect))
def test_list_tests_of_text_look_in_strings_on_milvus(dialect: Dialect) -> None:
    written = to_milvus(c(Op.CONTAINS, "internal"), dialect)
    if dialect is Dialect.SERVER_2_3:  # its like takes a prefix: any string, then the check
        assert written.expr == '(json_contains(k, "internal") or k >= "")'
        assert not written.exact
    else:
        assert written.expr == '(json_contains(k, "internal") or k like "%internal%")'
        assert written.exact
    negated = to_milvus(Group(Combine.NOT, (c(Op.ANY, ["a"]),)), dialect)
    assert (negated.expr, negated.exact) == (None, False)
    numbers = to_milvus(Group(Combine.NOT, (c(Op.CONTAINS, 3),)), Dialect.SERVER_2_3)
    assert (numbers.expr, numbers.exact) == ("not (json_contains(k, 3))", True)


def test_no_filter_matches_everything() -> None:
    assert matching(None) == set(ROWS)
    assert all_of(None, None) is None


def test_filters_combine_by_and() -> None:
    combined = all_of(c(Op.NE, "a"), None, c(Op.NE, "b"))
    assert isinstance(combined, Group) and combined.combine is Combine.AND
    assert matching(combined) == set(ROWS) - {"string", "other_string"}


# Refused before any query --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("op", "value", "message"),
    [
        (Op.IN, ["a", 1], "mixes values"),
        (Op.EQ, ["a"], "use IN or NIN"),
        (Op.NE, ["a"], "use IN or NIN"),
        (Op.TEXT_MATCH, 3, "needs a string"),
        (Op.EQ, None, "no value"),
        (Op.EQ, float("nan"), "not a number"),
        (Op.EQ, {"a": 1}, "type dict"),
    ],
)
def test_filters_that_mean_nothing_are_refused(op: Op, value: object, message: str) -> None:
    with pytest.raises(UnsafeFilterError, match=message):
        c(op, value)


def test_an_empty_nested_group_is_an_error() -> None:
    with pytest.raises(UnsafeFilterError, match="empty"):
        Group(Combine.AND, (c(Op.EQ, "a"), Group(Combine.OR, ())))


@pytest.mark.parametrize(
    "key",
    [
        "doc_type\n",
        "and\n",
        "array_length",
        "ARRAY_LENGTH",
        "array_contains_any",
        "array_contains_all",
        "json_contains_any",
        "json_contains_all",
        "Not",
        "a b",
        "1a",
        "",
    ],
)
def test_refused_keys(key: str) -> None:
    with pytest.raises(UnsafeFilterError, match="field name"):
        check_key(key)
    with pytest.raises(UnsafeFilterError):
        Condition(key, Op.EQ, "x")


def test_the_reserved_list_is_lower_case_and_covers_the_engine_functions() -> None:
    assert all(word == word.lower() for word in RESERVED_WORDS)
    for word in ("array_length", "json_contains_any", "json_contains_all", "exists", "like"):
        assert word in RESERVED_WORDS


def test_allowed_keys() -> None:
    assert check_key("doc_type", frozenset({"doc_type"})) == "doc_type"
    with pytest.raises(UnsafeFilterError, match="allowed"):
        to_milvus(c(Op.EQ, "a", key="lang"), Dialect.LITE_2, allowed_keys={"doc_type"})


# The translation -------------------------------------------------------------------------------
def test_declared_fields_are_written_for_their_type() -> None:
    declared = DeclaredFields(lists=frozenset({"tags"}), scalars=frozenset({"doc_type"}))
    listed = to_milvus(c(Op.CONTAINS, "a", "tags"), Dialect.LITE_2, declared=declared)
    assert (listed.expr, listed.exact) == ('json_contains(tags, "a")', True)
    empty = to_milvus(c(Op.IS_EMPTY, None, "tags"), Dialect.LITE_2, declared=declared)
    assert (empty.expr, empty.exact) == ("array_length(tags) == 0", True)
    with pytest.raises(UnsafeFilterError, match="!= on 'tags', a declared ARRAY field"):
        to_milvus(c(Op.NE, "a", "tags"), Dialect.MODERN, declared=declared)
    with pytest.raises(UnsafeFilterError, match="any on 'doc_type', a declared scalar field"):
        to_milvus(c(Op.ANY, ["a"], "doc_type"), Dialect.MODERN, declared=declared)


@pytest.mark.parametrize(
    ("kind", "held", "refused"),
    [
        (ValueKind.TEXT, ["a", ""], [1, 1.5, True]),
        (ValueKind.NUMBER, [1, -2.5, 0], ["1", True, False]),
        (ValueKind.WHOLE_NUMBER, [1, -2, 0], ["1", True, 1.5]),
        (ValueKind.BOOLEAN, [True, False], [1, 0, "true"]),
    ],
)
def test_a_declared_field_compares_with_values_of_its_kind(kind, held, refused) -> None:
    """Milvus refuses (``Invalid expr``) a value of another type than a declared field's: a
    number on a VARCHAR, say, or a boolean on an INT64 (``True`` is an int in Python)."""
    declared = DeclaredFields(scalars=frozenset({"k"}), kinds=(("k", kind),))
    for value in held:
        assert to_milvus(c(Op.EQ, value, "k"), Dialect.MODERN, declared=declared).exact
    for value in refused:
        with pytest.raises(UnsafeFilterError, match=f"holding {kind}s"):
            to_milvus(c(Op.EQ, value, "k"), Dialect.MODERN, declared=declared)
    assert [value_kind(t) for t in ("VARCHAR", "INT8", "DOUBLE", "BOOL", "JSON")] == [
        ValueKind.TEXT,
        ValueKind.WHOLE_NUMBER,
        ValueKind.NUMBER,
        ValueKind.BOOLEAN,
        None,
    ]


def test_a_declared_integer_field_compares_with_whole_numbers_only() -> None:
    """Milvus refuses a float on an INT64 field (``year > 2020.5``, ``year == 2021.0``: Invalid
    expr), which passed the check as a number. A list test on an ARRAY of integers takes any
    number (``json_contains(ids, 1.5)`` holds for none), and no vector field is compared."""
    kinds = (("year", value_kind("INT64")), ("ids", value_kind("INT32")))
    declared = DeclaredFields(scalars=frozenset({"year"}), lists=frozenset({"ids"}), kinds=kinds)
    assert to_milvus(c(Op.GT, 2020, "year"), Dialect.MODERN, declared=declared).exact
    for value in (2020.5, 2021.0):
        with pytest.raises(UnsafeFilterError, match=r"'year', .* holding whole numbers"):
            to_milvus(c(Op.GT, value, "year"), Dialect.MODERN, declared=declared)
    written = to_milvus(c(Op.CONTAINS, 1.5, "ids"), Dialect.MODERN, declared=declared)
    assert written.expr == "json_contains(ids, 1.5)"
    assert value_kind("DOUBLE") is value_kind("FLOAT") is ValueKind.NUMBER
    assert value_kind("FLOAT_VECTOR") is value_kind("INT8_VECTOR") is None


def test_keys_inside_one_json_field() -> None:
    """A store whose metadata is one JSON field reads a key as ``field["key"]``: the key
    checked as any other, then quoted."""
    internal = Group(Combine.NOT, (c(Op.EQ, "a", "doc_type"), c(Op.CONTAINS, 1, "tags")))
    written = to_milvus(internal, Dialect.MODERN, json_field="metadata")
    assert written.expr == '(not (metadata["doc_type"] == "a") or not exists metadata["doc_type"])'
    listed = to_milvus(c(Op.CONTAINS, 1, "tags"), Dialect.SERVER_2_3, json_field="metadata")
    assert listed.expr == 'json_contains(metadata["tags"], 1)'
    lite = to_milvus(c(Op.NE, "a", "doc_type"), Dialect.LITE_2, json_field="metadata")
    assert lite.expr == 'metadata["doc_type"] != "a"'
    with pytest.raises(UnsafeFilterError):
        to_milvus(c(Op.EQ, "a", 'x"] or ["y'), Dialect.LITE_2, json_field="metadata")
    with pytest.raises(UnsafeFilterError):
        to_milvus(c(Op.EQ, "a"), Dialect.LITE_2, json_field="meta data")


def test_lite_2_writes_negation_without_not() -> None:
    internal = Group(Combine.NOT, (c(Op.EQ, "a", "doc_type"), c(Op.EQ, "ops", "source")))
    written = to_milvus(internal, Dialect.LITE_2)
    assert written.expr == '((doc_type != "a") and (source != "ops"))'
    assert written.exact
    assert "not" not in to_milvus(c(Op.NIN, ["a", "b"]), Dialect.LITE_2).expr  # type: ignore[operator]


def test_modern_negation_keeps_rows_without_the_key() -> None:
    written = to_milvus(c(Op.NE, "a"), Dialect.MODERN)
    assert written.expr == '(not (k == "a") or not exists k)'


def test_is_empty_is_never_array_length_alone_where_exact_forms_exist() -> None:
    assert "exists" in to_milvus(c(Op.IS_EMPTY), Dialect.MODERN).expr  # type: ignore[operator]
    lite = to_milvus(c(Op.IS_EMPTY), Dialect.LITE_2)
    assert not lite.exact  # a superset: the engine checks every candidate


def test_empty_lists_never_reach_the_engine() -> None:
    assert to_milvus(c(Op.IN, []), Dialect.LITE_2).never
    assert to_milvus(c(Op.NIN, []), Dialect.LITE_2).expr is None
    assert none_match(Group(Combine.AND, (c(Op.EQ, "a"), c(Op.IN, []))))
    assert not none_match(Group(Combine.OR, (c(Op.EQ, "a"), c(Op.IN, []))))


def test_text_match_is_a_substring_like() -> None:
    assert to_milvus(c(Op.TEXT_MATCH, "ab"), Dialect.LITE_2).expr == 'k like "%ab%"'
    wild = to_milvus(c(Op.TEXT_MATCH, "a%b_c"), Dialect.LITE_2)
    assert wild.expr == 'k like "%a%b%c%"' and not wild.exact


def test_text_match_insensitive_is_refused_on_milvus() -> None:
    with pytest.raises(UnsafeFilterError, match="TEXT_MATCH"):
        to_milvus(c(Op.TEXT_MATCH_INSENSITIVE, "a"), Dialect.MODERN)


def test_values_stay_literals() -> None:
    written = to_milvus(c(Op.EQ, '") or (k != "'), Dialect.LITE_2)
    assert written.expr == 'k == "\\") or (k != \\""'


def test_modern_orderings_have_no_exact_complement() -> None:
    written = to_milvus(Group(Combine.NOT, (c(Op.GT, 1),)), Dialect.MODERN)
    assert written.expr is None and not written.exact  # a string is neither > 1 nor <= 1 there


@pytest.mark.parametrize("dialect", list(Dialect))
def test_a_negative_number_is_an_argument_milvus_reads(dialect: Dialect) -> None:
    """Milvus Lite 3 and the server read no sign in a function's argument."""
    assert to_milvus(c(Op.CONTAINS, -1), dialect).expr == "json_contains(k, (-1))"
    assert to_milvus(c(Op.CONTAINS, -2.5), dialect).expr == "json_contains(k, (-2.5))"
    assert to_milvus(c(Op.ANY, [-1, 2]), dialect).expr == "json_contains_any(k, [-1, 2])"


def test_numpy_and_enum_values_are_their_built_in_values() -> None:
    """A store writes a value's ``repr``: ``np.float64(0.5)`` and ``<Level.HIGH: 'high'>``
    are no Milvus literals, and an enum is no str to a row's JSON value."""
    import enum

    np = pytest.importorskip("numpy")

    class Level(enum.StrEnum):
        HIGH = "high"

    class Rank(enum.IntEnum):
        TOP = 1

    written = to_milvus(
        Group(
            Combine.AND,
            (c(Op.GT, np.float64(0.5)), c(Op.EQ, Level.HIGH, "level"), c(Op.IN, [Rank.TOP])),
        ),
        Dialect.MODERN,
    )
    assert written.expr == '(((k > 0.5) and (level == "high")) and (k == 1))'
    for value in (np.int64(3), np.bool_(True), np.str_("a")):
        assert type(c(Op.EQ, value).value) is type(value.item())
    assert matches(c(Op.EQ, np.int64(1)), {"k": 1}) and matches(
        c(Op.EQ, Level.HIGH, "l"), {"l": "high"}
    )
    with pytest.raises(UnsafeFilterError, match="type ndarray"):
        c(Op.EQ, np.array([1.0]))


@pytest.mark.parametrize("dialect", [Dialect.MODERN, Dialect.PLAIN])
def test_is_empty_inside_one_json_field_on_engines_that_take_no_length_of_a_key(dialect) -> None:
    """Milvus Lite 3 takes ``array_length`` of a field only: ``array_length(metadata["tags"])``
    failed every filtered call with ``array_length: expected ')'``. The test of an empty key
    inside the JSON field is left to the reference check there; Milvus Lite 2.5 runs it."""
    for f in (c(Op.IS_EMPTY, None, "tags"), Group(Combine.NOT, (c(Op.IS_EMPTY, None, "tags"),))):
        written = to_milvus(f, dialect, json_field="metadata")
        assert "array_length" not in str(written.expr)
        assert not written.exact
    lite = to_milvus(c(Op.IS_EMPTY, None, "tags"), Dialect.LITE_2, json_field="metadata")
    assert lite.expr == 'array_length(metadata["tags"]) == 0'
