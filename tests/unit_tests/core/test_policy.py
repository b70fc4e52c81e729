"""RetrievalPolicy: defaults, validation, overrides, floors, serialisation, profiles."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from pydantic import ValidationError

from thresholded import (
    CalibrationProfile,
    ModelMismatchError,
    PolicyFileError,
    ProfileError,
    RetrievalPolicy,
    UncalibratedModelError,
)
from thresholded.policy import MILVUS_MAX_TOP_K

# Defaults ------------------------------------------------------------------------------


def test_defaults() -> None:
    policy = RetrievalPolicy()
    assert policy.min_similarity is None
    assert policy.top_k == 4
    assert policy.over_fetch == 3
    assert policy.fetch_k == 12
    assert policy.max_per_source == 2
    assert policy.max_chars == 4000
    assert policy.max_attachment_chars is None
    assert policy.source_key == "source"
    assert policy.embedding_model is None
    assert policy.strict_score_kind is False
    assert policy.hybrid_policy == "pass"


def test_hybrid_policy_values() -> None:
    assert RetrievalPolicy(hybrid_policy="rescore").hybrid_policy == "rescore"
    with pytest.raises(ValidationError) as info:
        RetrievalPolicy(hybrid_policy="drop")  # type: ignore[arg-type]
    assert "hybrid_policy" in str(info.value)


def test_fetch_k_is_top_k_times_over_fetch() -> None:
    assert RetrievalPolicy(top_k=5, over_fetch=4).fetch_k == 20
    assert RetrievalPolicy(top_k=1, over_fetch=1).fetch_k == 1


def test_policy_is_frozen() -> None:
    policy = RetrievalPolicy()
    with pytest.raises(ValidationError):
        policy.top_k = 10  # type: ignore[misc]
    assert policy.top_k == 4


def test_none_disables_caps() -> None:
    policy = RetrievalPolicy(max_per_source=None, max_chars=None, max_attachment_chars=None)
    assert policy.max_per_source is None
    assert policy.max_chars is None
    assert policy.max_attachment_chars is None


# min_similarity validation -------------------------------------------------------------


@pytest.mark.parametrize("value", [-1, -1.0, -0.25, 0, 0.0, 0.35, 1, 1.0])
def test_valid_floors_are_accepted_as_floats(value: float) -> None:
    policy = RetrievalPolicy(min_similarity=value)
    assert policy.min_similarity == float(value)
    assert isinstance(policy.min_similarity, float)


@pytest.mark.parametrize(
    "value",
    [math.nan, math.inf, -math.inf, 1.5, 1.0000001, -2, -1.0000001, "0.3", True, False, [0.3]],
)
def test_invalid_floors_are_rejected_naming_the_field(value: object) -> None:
    with pytest.raises(ValidationError) as info:
        RetrievalPolicy(min_similarity=value)
    assert "min_similarity" in str(info.value)


@pytest.mark.parametrize("value", [-0.5, 0, 0.17, 1])
def test_valid_gates_are_accepted_as_floats(value: float) -> None:
    policy = RetrievalPolicy(min_top_similarity=value)
    assert policy.min_top_similarity == float(value)
    assert isinstance(policy.min_top_similarity, float)


@pytest.mark.parametrize("value", [math.nan, math.inf, 1.5, -2, "0.2", True, False, [0.2]])
def test_invalid_gates_are_rejected_naming_the_field(value: object) -> None:
    with pytest.raises(ValidationError) as info:
        RetrievalPolicy(min_top_similarity=value)
    assert "min_top_similarity" in str(info.value)


def test_gate_is_off_by_default_and_in_stored_policies_without_it() -> None:
    assert RetrievalPolicy().min_top_similarity is None
    assert RetrievalPolicy.from_json('{"min_similarity": 0.1}').min_top_similarity is None
    assert "min_top_similarity" in RetrievalPolicy.model_fields
    assert RetrievalPolicy.model_fields["min_top_similarity"].description


def test_invalid_floor_in_json_is_rejected() -> None:
    with pytest.raises(ValidationError) as info:
        RetrievalPolicy.from_json('{"min_similarity": 1.5}')
    assert "min_similarity" in str(info.value)
    with pytest.raises(ValidationError) as info:
        RetrievalPolicy.from_json('{"min_similarity": "0.3"}')
    assert "min_similarity" in str(info.value)


def test_nan_in_json_is_rejected() -> None:
    with pytest.raises(ValidationError) as info:
        RetrievalPolicy.from_json('{"min_similarity": NaN}')
    assert "min_similarity" in str(info.value)


# Other fields' validation ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("top_k", 0),
        ("top_k", -1),
        ("top_k", True),
        ("top_k", 2.5),
        ("top_k", "4"),
        ("over_fetch", 0),
        ("over_fetch", -3),
        ("max_per_source", 0),
        ("max_per_source", -1),
        ("max_chars", 0),
        ("max_chars", -100),
        ("max_attachment_chars", 0),
        ("source_key", ""),
        ("source_key", "   "),
        ("source_key", "\t\n"),
        ("strict_score_kind", "yes"),
        ("strict_score_kind", 1),
    ],
)
def test_invalid_values_are_rejected_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as info:
        RetrievalPolicy(**{field: value})
    assert field in str(info.value)
    errors = info.value.errors()
    assert [e["loc"][0] for e in errors] == [field]


def test_a_search_may_fetch_up_to_the_milvus_limit() -> None:
    assert RetrievalPolicy(top_k=4096, over_fetch=4).fetch_k == MILVUS_MAX_TOP_K == 16_384
    assert RetrievalPolicy(top_k=16_384, over_fetch=1).fetch_k == 16_384


@pytest.mark.parametrize(("top_k", "over_fetch"), [(6000, 3), (16_385, 1), (1, 20_000)])
def test_fetching_more_than_one_milvus_search_returns_is_refused(
    top_k: int, over_fetch: int
) -> None:
    """Milvus answers a search for more than 16,384 results with a bare "invalid parameter"."""
    with pytest.raises(ValidationError) as info:
        RetrievalPolicy(top_k=top_k, over_fetch=over_fetch)
    message = str(info.value)
    assert f"{top_k} x {over_fetch} = {top_k * over_fetch}" in message
    assert "16,384, the most one Milvus search returns" in message
    assert "lower top_k or over_fetch" in message
    with pytest.raises(ValidationError, match="16,384"):
        RetrievalPolicy(top_k=1, over_fetch=1).with_overrides(top_k=top_k, over_fetch=over_fetch)


def test_unknown_field_is_rejected_naming_it() -> None:
    with pytest.raises(ValidationError) as info:
        RetrievalPolicy(min_similarty=0.3)  # type: ignore[call-arg]
    assert "min_similarty" in str(info.value)


def test_unknown_field_in_stored_policy_is_rejected() -> None:
    with pytest.raises(ValidationError) as info:
        RetrievalPolicy.from_dict({"top_k": 3, "treshold": 0.4})
    assert "treshold" in str(info.value)
    with pytest.raises(ValidationError) as info:
        RetrievalPolicy.from_json('{"treshold": 0.4}')
    assert "treshold" in str(info.value)


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("similarity_cutoff", "min_similarity"),  # LlamaIndex's SimilarityPostprocessor
        ("score_threshold", "min_similarity"),  # LangChain's similarity_score_threshold
        ("similarity_top_k", "top_k"),  # LlamaIndex's retriever
        ("k", "top_k"),  # LangChain's search_kwargs
        ("min_similarty", "min_similarity"),  # a typo
    ],
)
def test_an_unknown_field_names_the_field_meant(given: str, meant: str) -> None:
    """A newcomer writes the floor or top_k under the name their framework gives it: the
    error said only "Extra inputs are not permitted"."""
    with pytest.raises(ValidationError) as info:
        RetrievalPolicy(**{given: 0.3 if meant == "min_similarity" else 3})
    message = str(info.value)
    assert repr(given) in message and f"{meant}=" in message
    with pytest.raises(ValidationError, match=f"{meant}="):
        RetrievalPolicy.from_dict({given: 3})


# Stored policies --------------------------------------------------------------------------


def test_stored_policy_lacking_fields_loads_defaults() -> None:
    policy = RetrievalPolicy.from_dict({"top_k": 6})
    assert policy.top_k == 6
    assert policy == RetrievalPolicy(top_k=6)
    assert policy.max_chars == 4000
    assert policy.min_similarity is None


def test_empty_stored_policy_is_the_default_policy() -> None:
    assert RetrievalPolicy.from_json("{}") == RetrievalPolicy()
    assert RetrievalPolicy.from_dict({}) == RetrievalPolicy()


def test_json_and_dict_round_trip() -> None:
    policy = RetrievalPolicy(
        min_similarity=0.42,
        top_k=7,
        over_fetch=2,
        max_per_source=None,
        max_chars=1234,
        max_attachment_chars=99,
        source_key="file_name",
        embedding_model="bge-m3@1024",
        strict_score_kind=True,
    )
    assert RetrievalPolicy.from_json(policy.to_json()) == policy
    assert RetrievalPolicy.from_dict(policy.to_dict()) == policy
    data = json.loads(policy.to_json())
    assert data["embedding_model"] == "BAAI/bge-m3@1024"
    assert data["max_per_source"] is None


def test_save_and_load(tmp_path: Path) -> None:
    policy = RetrievalPolicy(min_similarity=0.3, top_k=2)
    path = tmp_path / "policy.json"
    policy.save(path)
    assert RetrievalPolicy.load(path) == policy
    assert json.loads(path.read_text(encoding="utf-8"))["min_similarity"] == 0.3


def test_load_of_partial_file_uses_defaults(tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    path.write_text('{"min_similarity": 0.5}', encoding="utf-8")
    policy = RetrievalPolicy.load(path)
    assert policy.min_similarity == 0.5
    assert policy.top_k == 4
    assert policy.max_per_source == 2


def test_load_of_invalid_file_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    path.write_text('{"top_k": 0}', encoding="utf-8")
    with pytest.raises(ValidationError) as info:
        RetrievalPolicy.load(path)
    assert "top_k" in str(info.value)


@pytest.mark.parametrize(
    "text",
    ['{"min_similarity": true}', '{"top_k": true}', '{"max_chars": false}', '{"over_fetch": 2.0}'],
)
def test_stored_booleans_and_floats_are_not_counts_or_floors(tmp_path: Path, text: str) -> None:
    field = next(iter(json.loads(text)))
    with pytest.raises(ValidationError) as info:
        RetrievalPolicy.from_json(text)
    assert field in str(info.value)
    path = tmp_path / "policy.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValidationError) as info:
        RetrievalPolicy.load(path)
    assert field in str(info.value)


def test_a_repeated_field_is_refused_naming_it_and_the_file(tmp_path: Path) -> None:
    text = '{"min_similarity": 0.2, "top_k": 3, "min_similarity": 0.9}'
    with pytest.raises(PolicyFileError, match="'min_similarity' appears more than once"):
        RetrievalPolicy.from_json(text)
    path = tmp_path / "policy.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PolicyFileError) as info:
        RetrievalPolicy.load(path)
    assert str(path) in str(info.value)
    assert "min_similarity" in str(info.value)


@pytest.mark.parametrize(
    ("text", "problem"),
    [("{top_k: 3", "not valid JSON"), ("[]", "holds a JSON list"), ("4", "holds a JSON int")],
)
def test_a_file_that_is_not_a_policy_is_refused_naming_it(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "policy.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PolicyFileError) as info:
        RetrievalPolicy.load(path)
    assert str(path) in str(info.value) and problem in str(info.value)


def test_a_missing_policy_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(PolicyFileError, match=r"nope\.json cannot be read"):
        RetrievalPolicy.load(tmp_path / "nope.json")


# Embedding model -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("bge-m3", "BAAI/bge-m3"),
        ("BGE-M3", "BAAI/bge-m3"),
        ("baai/bge-m3", "BAAI/bge-m3"),
        ("BAAI/bge-m3", "BAAI/bge-m3"),
        ("bge-m3@1024", "BAAI/bge-m3@1024"),
        ("  BAAI/bge-m3@1024  ", "BAAI/bge-m3@1024"),
        ("minilm@384", "sentence-transformers/all-MiniLM-L6-v2@384"),
        ("org/custom-model@256", "org/custom-model@256"),
    ],
)
def test_embedding_model_is_canonical(given: str, canonical: str) -> None:
    assert RetrievalPolicy(embedding_model=given).embedding_model == canonical


def test_blank_embedding_model_is_rejected() -> None:
    with pytest.raises(ValidationError) as info:
        RetrievalPolicy(embedding_model="  ")
    assert "embedding_model" in str(info.value)


# Resolving the floor ---------------------------------------------------------------------


def test_explicit_floor_wins() -> None:
    assert RetrievalPolicy(min_similarity=0.6).resolve_min_similarity() == 0.6
    assert RetrievalPolicy(min_similarity=0.6).resolve_min_similarity("minilm") == 0.6


def test_zero_floor_resolves_to_zero_even_for_an_uncalibrated_model() -> None:
    policy = RetrievalPolicy(min_similarity=0, embedding_model="org/uncalibrated")
    assert policy.resolve_min_similarity() == 0.0
    assert policy.resolve_min_similarity("org/uncalibrated@64") == 0.0


def test_none_floor_is_the_default_of_bge_m3() -> None:
    assert RetrievalPolicy(embedding_model="BAAI/bge-m3").resolve_min_similarity() == 0.35
    assert RetrievalPolicy(embedding_model="bge-m3@1024").resolve_min_similarity() == 0.35
    assert RetrievalPolicy().resolve_min_similarity("bge-m3") == 0.35
    assert RetrievalPolicy().resolve_min_similarity("BAAI/bge-m3@1024") == 0.35


def test_none_floor_for_unknown_model_says_to_calibrate() -> None:
    with pytest.raises(UncalibratedModelError) as info:
        RetrievalPolicy(embedding_model="org/unknown-model").resolve_min_similarity()
    message = str(info.value)
    assert "org/unknown-model" in message
    assert "alibrat" in message


def test_none_floor_without_any_model_says_to_calibrate() -> None:
    with pytest.raises(UncalibratedModelError) as info:
        RetrievalPolicy().resolve_min_similarity()
    assert "embedding_model" in str(info.value)


def test_mismatching_model_is_refused() -> None:
    policy = RetrievalPolicy(min_similarity=0.35, embedding_model="BAAI/bge-m3")
    with pytest.raises(ModelMismatchError) as info:
        policy.resolve_min_similarity("sentence-transformers/all-MiniLM-L6-v2")
    assert "BAAI/bge-m3" in str(info.value)
    assert "all-MiniLM-L6-v2" in str(info.value)


def test_mismatching_dimension_is_refused() -> None:
    policy = RetrievalPolicy(embedding_model="BAAI/bge-m3@1024")
    with pytest.raises(ModelMismatchError):
        policy.resolve_min_similarity("BAAI/bge-m3@768")


def test_same_model_under_an_alias_is_accepted() -> None:
    policy = RetrievalPolicy(embedding_model="BAAI/bge-m3@1024")
    assert policy.resolve_min_similarity("bge-m3") == 0.35
    assert policy.resolve_min_similarity("bge-m3@1024") == 0.35


def test_builtin_floor_refuses_another_dimension() -> None:
    with pytest.raises(ModelMismatchError):
        RetrievalPolicy().resolve_min_similarity("BAAI/bge-m3@768")


# with_overrides --------------------------------------------------------------------------


def test_with_overrides_returns_a_changed_copy() -> None:
    policy = RetrievalPolicy(min_similarity=0.35, top_k=4)
    changed = policy.with_overrides(min_similarity=0.5, top_k=2)
    assert changed.min_similarity == 0.5
    assert changed.top_k == 2
    assert changed.max_chars == policy.max_chars
    assert policy.min_similarity == 0.35  # the original is untouched
    assert policy.top_k == 4


def test_with_overrides_accepts_zero_floor() -> None:
    changed = RetrievalPolicy(min_similarity=0.35).with_overrides(min_similarity=0)
    assert changed.min_similarity == 0.0


def test_with_overrides_ignores_none() -> None:
    policy = RetrievalPolicy(min_similarity=0.4, max_chars=100)
    assert policy.with_overrides(min_similarity=None, max_chars=None) == policy
    assert policy.with_overrides() == policy


def test_with_overrides_canonicalises_the_model() -> None:
    changed = RetrievalPolicy().with_overrides(embedding_model="bge-m3")
    assert changed.embedding_model == "BAAI/bge-m3"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("min_similarity", 1.5),
        ("min_similarity", math.nan),
        ("min_similarity", "0.3"),
        ("top_k", 0),
        ("max_chars", 0),
        ("max_per_source", 0),
        ("source_key", " "),
        ("no_such_field", 1),
    ],
)
def test_invalid_override_raises(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as info:
        RetrievalPolicy().with_overrides(**{field: value})
    assert field in str(info.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("min_similarity", 33),
        ("min_top_similarity", math.nan),
        ("top_k", 0),
        ("max_chars", "4000"),
        ("hybrid_policy", "rescored"),
        ("min_similarty", 0.3),
    ],
)
def test_model_copy_validates_its_update_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as info:
        RetrievalPolicy(min_similarity=0.3).model_copy(update={field: value})
    assert field in str(info.value)


def test_model_copy_sets_a_field_to_none_and_canonicalises_the_model() -> None:
    policy = RetrievalPolicy(min_similarity=0.3, max_chars=100)
    copy = policy.model_copy(update={"max_chars": None, "embedding_model": "bge-m3"})
    assert copy.max_chars is None
    assert copy.embedding_model == "BAAI/bge-m3"
    assert policy.max_chars == 100  # the original is untouched
    assert policy.model_copy() == policy


# from_profile ----------------------------------------------------------------------------


def _profile(tmp_path: Path, **fields: object) -> Path:
    data = {
        "version": 1,
        "min_similarity": 0.41,
        "embedding_model": "bge-m3@1024",
        "collection": "docs",
        **fields,
    }
    path = tmp_path / "profile.json"
    CalibrationProfile(**data).save(path)  # type: ignore[arg-type]
    return path


def test_from_profile_takes_floor_and_model(tmp_path: Path) -> None:
    path = _profile(tmp_path)
    policy = RetrievalPolicy.from_profile(path, collection="docs", top_k=6)
    assert policy.min_similarity == 0.41
    assert policy.embedding_model == "BAAI/bge-m3@1024"
    assert policy.top_k == 6
    assert policy.resolve_min_similarity("bge-m3") == 0.41
    assert policy.min_top_similarity is None  # a version 1 profile has no gate


def test_from_profile_takes_the_gate_of_a_version_2_profile(tmp_path: Path) -> None:
    path = _profile(tmp_path, version=2, min_top_similarity=0.17)
    policy = RetrievalPolicy.from_profile(path, top_k=6)
    assert (policy.min_similarity, policy.min_top_similarity) == (0.41, 0.17)


def test_from_profile_without_collection_is_accepted(tmp_path: Path) -> None:
    policy = RetrievalPolicy.from_profile(_profile(tmp_path))
    assert policy.min_similarity == 0.41


def test_from_profile_refuses_another_collection(tmp_path: Path) -> None:
    path = _profile(tmp_path)
    with pytest.raises(ProfileError) as info:
        RetrievalPolicy.from_profile(path, collection="laws")
    message = str(info.value)
    assert "docs" in message
    assert "laws" in message
    assert str(path) in message


def test_from_profile_refuses_a_mismatching_model_later(tmp_path: Path) -> None:
    policy = RetrievalPolicy.from_profile(_profile(tmp_path))
    with pytest.raises(ModelMismatchError):
        policy.resolve_min_similarity("minilm")


def test_from_profile_of_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ProfileError) as info:
        RetrievalPolicy.from_profile(tmp_path / "nope.json")
    assert "nope.json" in str(info.value)


def test_from_profile_validates_other_fields(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as info:
        RetrievalPolicy.from_profile(_profile(tmp_path), top_k=0)
    assert "top_k" in str(info.value)


PROFILE = Path(__file__).resolve().parents[3] / "data" / "profiles" / "xquad-minilm-en.json"


@pytest.mark.parametrize(
    "given",
    [{"min_similarity": 0.6}, {"min_top_similarity": 0.7}, {"embedding_model": "BAAI/bge-m3"}],
)
def test_a_policy_beside_a_profile_may_not_set_another_floor_gate_or_model(given) -> None:
    """One of the two used to be dropped without a word: the profile's won."""
    from thresholded.policy import profiled_policy

    with pytest.raises(ValueError, match=rf"sets {next(iter(given))}=.*profile"):
        profiled_policy(RetrievalPolicy(**given), PROFILE, collection="xquad-bench")
    with pytest.raises(ValueError, match="not both"):
        RetrievalPolicy.from_profile(PROFILE, **given)


def test_a_policy_beside_a_profile_gives_its_other_fields() -> None:
    from thresholded.policy import profiled_policy

    policy = RetrievalPolicy(top_k=7).with_overrides(max_chars=900)
    profiled = profiled_policy(policy, PROFILE, collection="xquad-bench")
    assert (profiled.top_k, profiled.max_chars) == (7, 900)
    assert (profiled.min_similarity, profiled.min_top_similarity) == (0.08, 0.17)


@pytest.mark.parametrize(
    "spelled", ["sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2", "minilm"]
)
def test_a_policy_beside_a_profile_may_name_the_profile_s_own_model(spelled: str) -> None:
    from thresholded.policy import profiled_policy

    policy = RetrievalPolicy(top_k=4, embedding_model=spelled)
    profiled = profiled_policy(policy, PROFILE, collection="xquad-bench")
    assert profiled.min_similarity == 0.08 and profiled.top_k == 4


def test_loading_a_profile_as_a_policy_says_to_use_from_profile(tmp_path: Path) -> None:
    """``RetrievalPolicy.load(threshold.json)`` listed eleven 'Extra inputs are not permitted'
    errors; the two kinds of file are told apart, each way."""
    profile = _profile(tmp_path, version=2, min_top_similarity=0.17)
    with pytest.raises(PolicyFileError) as info:
        RetrievalPolicy.load(profile)
    assert "calibration profile" in str(info.value)
    assert "RetrievalPolicy.from_profile(" in str(info.value)
    policy = tmp_path / "policy.json"
    RetrievalPolicy(min_similarity=0.3).save(policy)
    with pytest.raises(ProfileError) as info:
        RetrievalPolicy.from_profile(policy)
    assert "RetrievalPolicy.load(" in str(info.value)


def test_a_numpy_floor_is_a_number() -> None:
    """A floor computed with numpy (a percentile of scores) is a np.float32 or np.float64:
    "must be a number in [-1, 1], got np.float32(0.3)" contradicted itself."""
    np = pytest.importorskip("numpy")
    policy = RetrievalPolicy(min_similarity=np.float32(0.25), min_top_similarity=np.float64(0.5))
    assert (policy.min_similarity, policy.min_top_similarity) == (0.25, 0.5)
    assert type(policy.min_similarity) is float
    assert policy.with_overrides(min_similarity=np.float32(0.75)).min_similarity == 0.75
    with pytest.raises(ValidationError, match="must lie in"):
        RetrievalPolicy(min_similarity=np.float32(1.5))
    with pytest.raises(ValidationError, match="must be a number"):
        RetrievalPolicy(min_similarity=np.bool_(True))


@pytest.mark.parametrize("field", ["min_similarity", "min_top_similarity"])
def test_a_threshold_written_as_a_percentage_says_the_fraction_meant(field: str) -> None:
    """35 said only "must lie in [-1, 1], got 35"."""
    with pytest.raises(ValidationError, match=r"a percentage\? write 0\.35"):
        RetrievalPolicy(**{field: 35})
    with pytest.raises(ValidationError, match=r"a percentage\? write 0\.35"):
        RetrievalPolicy().with_overrides(**{field: 35})
    for beyond in (350, 1.3):  # 1.3 is no percentage anyone writes for a cosine floor
        with pytest.raises(ValidationError) as info:
            RetrievalPolicy(**{field: beyond})
        assert "percentage" not in str(info.value)


@pytest.mark.parametrize("field", ["max_per_source", "max_chars", "max_attachment_chars"])
def test_a_cap_or_budget_of_0_says_none_lifts_it(field: str) -> None:
    """0 turns the floor and the gate off; here it said only "greater than or equal to 1"."""
    with pytest.raises(ValidationError, match="None in a policy lifts it"):
        RetrievalPolicy(**{field: 0})
    with pytest.raises(ValidationError, match="None in a policy lifts it"):
        RetrievalPolicy().with_overrides(**{field: 0})
    assert getattr(RetrievalPolicy(**{field: None}), field) is None
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        RetrievalPolicy(**{field: -1})
