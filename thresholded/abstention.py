"""What an abstaining answer says, the same in both adapters: LlamaIndex's abstaining
engines and LangChain's ``AbstainingChain``."""

from __future__ import annotations

from typing import Any

from thresholded.report import ABSTAINED_BY

__all__ = [
    "DEFAULT_NO_MATCH_MESSAGE",
    "NOTHING_MATCHED",
    "check_no_match_message",
    "no_match_flags",
]

DEFAULT_NO_MATCH_MESSAGE = "No relevant information found."
"""The answer when nothing matched, unless another is given."""

NOTHING_MATCHED = "nothing_matched"
"""Key in an answer's metadata: True when the fixed answer was given without the LLM."""


def no_match_flags(abstained_by: str | None) -> dict[str, Any]:
    """The metadata of a no-match answer: ``nothing_matched``, and ``abstained_by`` (see
    :data:`~thresholded.report.ABSTAINED_BY`) when the retriever said what emptied it."""
    if abstained_by is None:
        return {NOTHING_MATCHED: True}
    return {NOTHING_MATCHED: True, ABSTAINED_BY: abstained_by}


def check_no_match_message(message: Any) -> str:
    """``message``, the fixed answer when nothing matched, if it says something: another
    value would be the answer as it is (``None``), a blank one an answer the user cannot see."""
    if not isinstance(message, str):
        raise TypeError(f"no_match_message must be a str, got {message!r}")
    if not message.strip():
        raise ValueError(
            f"no_match_message is blank ({message!r}): it is the whole answer when nothing "
            "matched, and the user would see nothing. Say that nothing was found (the "
            f"default: {DEFAULT_NO_MATCH_MESSAGE!r})"
        )
    return message
