"""Calibration profiles: versioned, validated, written atomically, never clobbered."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from thresholded import CalibrationProfile, ModelId, ProfileError, files


def _data(**overrides: object) -> dict:
    return {
        "version": 1,
        "min_similarity": 0.41,
        "embedding_model": "BAAI/bge-m3@1024",
        "collection": "docs",
        **overrides,
    }


def _write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# Construction ----------------------------------------------------------------------------


def test_minimal_profile() -> None:
    profile = CalibrationProfile(version=1, min_similarity=0.3, embedding_model="bge-m3@1024")
    assert profile.embedding_model == "BAAI/bge-m3@1024"
    assert profile.model_id == ModelId("BAAI/bge-m3", 1024)
    assert profile.metric == "IP"
    assert profile.mode == "never-lose"
    assert profile.collection is None
    assert profile.created  # a timestamp is filled in
    assert profile.measurements == {}


def test_version_is_required() -> None:
    with pytest.raises(ValidationError) as info:
        CalibrationProfile(min_similarity=0.3, embedding_model="bge-m3")  # type: ignore[call-arg]
    assert "version" in str(info.value)


@pytest.mark.parametrize("version", [0, 3, 99, -1])
def test_unknown_version_is_rejected(version: int) -> None:
    with pytest.raises(ValidationError) as info:
        CalibrationProfile(**_data(version=version))
    assert "version" in str(info.value)
    assert "not supported" in str(info.value)


@pytest.mark.parametrize("value", [math.nan, math.inf, 1.5, -1.5])
def test_invalid_floor_is_rejected(value: float) -> None:
    with pytest.raises(ValidationError) as info:
        CalibrationProfile(**_data(min_similarity=value))
    assert "min_similarity" in str(info.value)


def test_version_2_stores_floor_and_gate() -> None:
    profile = CalibrationProfile(**_data(version=2, min_top_similarity=0.17, gate_margin=0.02))
    assert (profile.min_similarity, profile.min_top_similarity) == (0.41, 0.17)
    assert profile.gate_margin == 0.02


def test_version_1_loads_with_the_gate_off(tmp_path: Path) -> None:
    profile = CalibrationProfile.load(_write(tmp_path / "p.json", _data()))
    assert profile.version == 1
    assert profile.min_top_similarity is None


def test_version_1_with_a_gate_is_refused() -> None:
    with pytest.raises(ValidationError) as info:
        CalibrationProfile(**_data(min_top_similarity=0.2))
    assert "version 1 profile has no gate" in str(info.value)


def test_version_2_lacking_the_gate_loads_with_it_off(tmp_path: Path) -> None:
    profile = CalibrationProfile.load(_write(tmp_path / "p.json", _data(version=2)))
    assert profile.min_top_similarity is None
    assert profile.gate_margin is None


@pytest.mark.parametrize("value", [math.nan, math.inf, 1.5, -1.5])
def test_invalid_gate_is_rejected(value: float) -> None:
    with pytest.raises(ValidationError) as info:
        CalibrationProfile(**_data(version=2, min_top_similarity=value))
    assert "min_top_similarity" in str(info.value)


def test_unknown_field_and_mode_are_rejected() -> None:
    with pytest.raises(ValidationError) as info:
        CalibrationProfile(**_data(threshold=0.3))
    assert "threshold" in str(info.value)
    with pytest.raises(ValidationError) as info:
        CalibrationProfile(**_data(mode="guess"))
    assert "mode" in str(info.value)


# load ------------------------------------------------------------------------------------


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    profile = CalibrationProfile(
        **_data(mode="loss-budget", max_loss=0.05, measurements={"answering": [0.5, 0.7]})
    )
    path = profile.save(tmp_path / "p.json")
    assert path == tmp_path / "p.json"
    loaded = CalibrationProfile.load(path)
    assert loaded == profile
    assert loaded.measurements == {"answering": [0.5, 0.7]}


def test_save_creates_parent_directories(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "p.json"
    CalibrationProfile(**_data()).save(path)
    assert CalibrationProfile.load(path).min_similarity == 0.41


def test_load_missing_file_names_it(tmp_path: Path) -> None:
    path = tmp_path / "missing.json"
    with pytest.raises(ProfileError) as info:
        CalibrationProfile.load(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("text", ["{not json", "", '{"version": 1,', "\x00\x01"])
def test_corrupt_json_is_a_profile_error_naming_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "corrupt.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ProfileError) as info:
        CalibrationProfile.load(path)
    assert str(path) in str(info.value)


def test_non_utf8_file_is_a_profile_error(tmp_path: Path) -> None:
    path = tmp_path / "binary.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ProfileError) as info:
        CalibrationProfile.load(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("data", [[1, 2], "a string", 3, {"min_similarity": 0.3}])
def test_json_that_is_not_a_profile_is_refused(tmp_path: Path, data: object) -> None:
    path = _write(tmp_path / "other.json", data)
    with pytest.raises(ProfileError) as info:
        CalibrationProfile.load(path)
    assert str(path) in str(info.value)
    assert "version" in str(info.value)


def test_unknown_version_on_disk_is_a_profile_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "future.json", _data(version=3))
    with pytest.raises(ProfileError) as info:
        CalibrationProfile.load(path)
    assert str(path) in str(info.value)
    assert "version" in str(info.value)


def test_invalid_value_on_disk_is_a_profile_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.json", _data(min_similarity=3))
    with pytest.raises(ProfileError) as info:
        CalibrationProfile.load(path)
    assert str(path) in str(info.value)
    assert "min_similarity" in str(info.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("min_similarity", True),
        ("min_similarity", False),
        ("margin", True),
        ("max_loss", False),
        ("min_similarity", "0.4"),
    ],
)
def test_a_boolean_or_a_string_is_not_a_number(tmp_path: Path, field: str, value: object) -> None:
    """``"min_similarity": true`` once loaded as a floor of 1.0: every question got nothing."""
    path = _write(tmp_path / "bool.json", _data(**{field: value}))
    with pytest.raises(ProfileError) as info:
        CalibrationProfile.load(path)
    assert str(path) in str(info.value)
    assert field in str(info.value)


@pytest.mark.parametrize("version", ["1", True, 1.0, None])
def test_the_version_is_an_integer(tmp_path: Path, version: object) -> None:
    path = _write(tmp_path / "version.json", _data(version=version))
    with pytest.raises(ProfileError) as info:
        CalibrationProfile.load(path)
    assert str(path) in str(info.value)
    assert "version" in str(info.value)


@pytest.mark.parametrize("metric", ["bogus", "", "HAMMING", 1])
def test_an_unknown_metric_is_refused_naming_the_known_ones(tmp_path: Path, metric: object) -> None:
    path = _write(tmp_path / "metric.json", _data(metric=metric))
    with pytest.raises(ProfileError) as info:
        CalibrationProfile.load(path)
    assert "metric" in str(info.value)
    if isinstance(metric, str):
        assert "IP, COSINE, L2" in str(info.value)


@pytest.mark.parametrize(("given", "canonical"), [("ip", "IP"), ("Cosine", "COSINE"), ("L2", "L2")])
def test_a_known_metric_loads_in_its_canonical_spelling(
    tmp_path: Path, given: str, canonical: str
) -> None:
    path = _write(tmp_path / "metric.json", _data(metric=given))
    assert CalibrationProfile.load(path).metric == canonical


def test_a_repeated_key_is_refused_naming_it_and_the_file(tmp_path: Path) -> None:
    path = tmp_path / "twice.json"
    path.write_text(
        '{"version": 1, "min_similarity": 0.2, "embedding_model": "bge-m3@1024",'
        ' "min_similarity": 0.9}',
        encoding="utf-8",
    )
    with pytest.raises(ProfileError) as info:
        CalibrationProfile.load(path)
    assert str(path) in str(info.value)
    assert "'min_similarity' appears more than once" in str(info.value)


def test_a_stored_profile_lacking_optional_fields_loads_their_defaults(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "minimal.json",
        {"version": 1, "min_similarity": 0.4, "embedding_model": "bge-m3@1024"},
    )
    profile = CalibrationProfile.load(path)
    assert (profile.metric, profile.mode, profile.collection) == ("IP", "never-lose", None)
    assert (profile.margin, profile.max_loss, profile.measurements) == (None, None, {})


def test_a_stored_profile_lacking_its_date_says_it_is_unknown(tmp_path: Path) -> None:
    # it took the time of loading, and a copy saved from it carried that as its measurement date
    path = _write(
        tmp_path / "undated.json",
        {"version": 2, "min_similarity": 0.4, "embedding_model": "bge-m3@1024"},
    )
    profile = CalibrationProfile.load(path)
    assert profile.created is None
    profile.save(tmp_path / "copy.json")
    assert json.loads((tmp_path / "copy.json").read_text(encoding="utf-8"))["created"] is None
    dated = _write(tmp_path / "dated.json", {**profile.model_dump(), "created": "2026-01-02"})
    assert CalibrationProfile.load(dated).created == "2026-01-02"


def test_profile_error_is_a_value_error(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text("nope", encoding="utf-8")
    with pytest.raises(ValueError):
        CalibrationProfile.load(path)


def test_load_never_overwrites_a_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.json"
    original = b'{"version": 1, "min_similarity": 0.4, "embedding_model": '
    path.write_bytes(original)
    for _ in range(2):
        with pytest.raises(ProfileError):
            CalibrationProfile.load(path)
    assert path.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corrupt.json"]


# save ------------------------------------------------------------------------------------


def test_save_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    CalibrationProfile(**_data(min_similarity=0.3)).save(path)
    before = path.read_bytes()
    with pytest.raises(FileExistsError) as info:
        CalibrationProfile(**_data(min_similarity=0.5)).save(path)
    assert "force" in str(info.value)
    assert path.read_bytes() == before
    assert CalibrationProfile.load(path).min_similarity == 0.3


def test_save_refuses_to_overwrite_a_corrupt_file_without_force(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_bytes(b"{corrupt")
    with pytest.raises(FileExistsError):
        CalibrationProfile(**_data()).save(path)
    assert path.read_bytes() == b"{corrupt"


def test_save_with_force_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    CalibrationProfile(**_data(min_similarity=0.3)).save(path)
    CalibrationProfile(**_data(min_similarity=0.5)).save(path, force=True)
    assert CalibrationProfile.load(path).min_similarity == 0.5


def test_save_leaves_no_temporary_files(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    CalibrationProfile(**_data()).save(path)
    CalibrationProfile(**_data()).save(path, force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json"]


def test_saved_file_is_readable_json_with_version(tmp_path: Path) -> None:
    path = CalibrationProfile(**_data(provenance="Grüße")).save(tmp_path / "p.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["version"] == 1
    assert data["min_similarity"] == 0.41
    assert data["embedding_model"] == "BAAI/bge-m3@1024"
    assert "Grüße" in path.read_text(encoding="utf-8")  # ensure_ascii=False


def test_failed_write_keeps_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "p.json"
    CalibrationProfile(**_data(min_similarity=0.3)).save(path)
    before = path.read_bytes()

    def crash(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(files.os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        CalibrationProfile(**_data(min_similarity=0.5)).save(path, force=True)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json"]


def test_interrupted_write_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "p.json"

    def crash(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(files.os, "fsync", crash)
    with pytest.raises(KeyboardInterrupt):
        CalibrationProfile(**_data()).save(path)
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_replaces_via_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "p.json"
    path.write_text("old", encoding="utf-8")
    calls: list[tuple[str, str]] = []
    real_replace = os.replace

    def spy(src: str, dst: str) -> None:
        calls.append((str(src), str(dst)))
        # at rename time the temporary file beside the target holds the full text
        assert Path(src).parent == path.parent
        assert Path(src).read_text(encoding="utf-8") == "new text"
        assert path.read_text(encoding="utf-8") == "old"
        real_replace(src, dst)

    monkeypatch.setattr(files.os, "replace", spy)
    files.atomic_write_text(path, "new text")
    assert len(calls) == 1
    assert calls[0][1] == str(path)
    assert path.read_text(encoding="utf-8") == "new text"


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (
            {"min_top_similarty": 0.4},
            r"unknown field 'min_top_similarty': write min_top_similarity",
        ),
        (
            {"top_k": 3},
            r"'top_k' is a policy field, not a profile's: give it beside the profile, "
            r"RetrievalPolicy.from_profile\(path, top_k=...\)",
        ),
        (
            {"k": 3},
            r"'k' is a policy field, not a profile's: give it beside the profile, "
            r"RetrievalPolicy.from_profile\(path, top_k=...\)",
        ),
        ({"zzz": 1}, r"unknown field 'zzz'; the fields are version, min_similarity, "),
    ],
)
def test_an_unknown_field_names_the_field_meant(tmp_path: Path, extra: dict, said: str) -> None:
    """A hand-edited profile with a typo, or a policy field (top_k), failed with pydantic's
    bare "Extra inputs are not permitted", where a stored policy names the field meant."""
    path = _write(tmp_path / "extra.json", _data(**extra))
    with pytest.raises(ProfileError, match=said):
        CalibrationProfile.load(path)
