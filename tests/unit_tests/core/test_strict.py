"""StrictArguments: a pydantic model takes its fields, by name or alias as pydantic would."""

from __future__ import annotations

from typing import ClassVar

import pytest
from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from thresholded.strict import StrictArguments, check_arguments


class Plain(StrictArguments, BaseModel):
    model_config = ConfigDict(extra="ignore")

    floor: float = 0.0


class Aliased(StrictArguments, BaseModel):
    aliased: int = Field(default=0, alias="other")
    choices: int = Field(default=0, validation_alias=AliasChoices("one", "two"))


class ByName(StrictArguments, BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    aliased: int = Field(default=0, alias="other")


class Consumes(StrictArguments, BaseModel):
    _init_keywords: ClassVar[tuple[str, ...]] = ("extra_setting",)

    value: int = 0

    def __init__(self, /, **data: object) -> None:
        self._check_keywords(data)
        data.pop("extra_setting", None)
        super().__init__(**data)


def test_an_ignored_keyword_is_a_type_error_naming_it_and_what_is_accepted():
    with pytest.raises(TypeError, match=r"Plain\(\) got an unexpected keyword argument 'bogus'"):
        Plain(bogus=1)
    with pytest.raises(TypeError, match=r"'flor' \(did you mean 'floor'\?\); it accepts: floor"):
        Plain(flor=0.3)
    with pytest.raises(TypeError, match="unexpected keyword arguments 'a', 'b'"):
        Plain(a=1, b=2)
    assert Plain(floor=0.3).floor == 0.3


def test_aliases_as_pydantic_reads_them():
    assert Aliased(other=1, one=2).aliased == 1
    assert Aliased(two=3).choices == 3
    with pytest.raises(TypeError, match="'aliased'"):  # pydantic would ignore it
        Aliased(aliased=1)
    assert ByName(aliased=1).aliased == ByName(other=1).aliased == 1


def test_model_validate_is_checked_too_and_init_keywords_are_accepted():
    with pytest.raises(TypeError, match="bogus"):
        Plain.model_validate({"bogus": 1})
    assert Consumes(value=1, extra_setting="x").value == 1
    with pytest.raises(TypeError, match="extra_settings"):
        Consumes(extra_settings="x")


def test_check_arguments_for_functions():
    check_arguments("f()", ["a"], ["a", "b"])
    with pytest.raises(TypeError, match=r"f\(\) got an unexpected keyword argument 'c'"):
        check_arguments("f()", ["a", "c"], ["a", "b"])


@pytest.mark.parametrize(
    ("given", "field"),
    [("min_similarity", "min_similarity"), ("max_chars", "max_chars"), ("k", "top_k")],
)
def test_a_policy_field_given_beside_policy_says_to_put_it_in_the_policy(given, field):
    # max_chars was "did you mean 'max_retries'?", which sets something else entirely
    with pytest.raises(TypeError) as info:
        check_arguments("R()", [given], ["policy", "max_retries", "timeout"])
    assert f"pass policy=RetrievalPolicy({field}=...)" in str(info.value)
    assert "did you mean" not in str(info.value)
