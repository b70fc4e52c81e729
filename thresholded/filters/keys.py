"""Which metadata keys a filter may name.

A key is written into the engine's expression as a field name, so it must be
exactly a field name: letters, digits and ``_``, not starting with a digit (the
whole key: a trailing newline is not a field name), and none of the keywords or
functions of any engine the package runs on, whatever their case. Some of those
words (``array_length``, ``json_contains_any``, ...) are read as calls, not
fields, and the embedded Milvus Lite 2.5 engine does not survive them.

With ``allowed=`` (``allowed_filter_keys`` on every retriever), only the listed
keys are accepted; they still must be field names.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from thresholded.errors import UnsafeFilterError

FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")

RESERVED_WORDS = frozenset(
    {
        # operators and literals
        "and",
        "or",
        "not",
        "in",
        "like",
        "is",
        "null",
        "true",
        "false",
        "exists",
        # functions of Milvus Lite 2.5 and 3.x, and of the Milvus 2.3 to 2.6 servers
        "array_contains",
        "array_contains_all",
        "array_contains_any",
        "array_length",
        "json_contains",
        "json_contains_all",
        "json_contains_any",
        "json_length",
        "text_match",
        "phrase_match",
        "random_sample",
        "element_filter",
        "match_all",
        "match_any",
        "match_least",
        "match_most",
        "match_exact",
        "st_equals",
        "st_touches",
        "st_overlaps",
        "st_crosses",
        "st_contains",
        "st_intersects",
        "st_within",
        "st_dwithin",
        "st_isvalid",
        "now",
    }
)
"""Keywords and function names of every pinned engine, lower case (matched ignoring case)."""


def check_key(key: object, allowed: Collection[str] | None = None) -> str:
    """``key`` when a filter may name it; :class:`UnsafeFilterError` before any query if not."""
    if not isinstance(key, str) or not FIELD_NAME.fullmatch(key):
        raise UnsafeFilterError(
            f"filter key {key!r} is not a plain field name: use letters, digits and '_', "
            "not starting with a digit"
        )
    if key.lower() in RESERVED_WORDS:
        raise UnsafeFilterError(
            f"filter key {key!r} is a keyword or function of the vector engine, not a field "
            "name: rename the metadata key"
        )
    if allowed is not None and key not in allowed:
        raise UnsafeFilterError(
            f"filter key {key!r} is not one of the allowed keys {sorted(allowed)}: "
            "add it to allowed_filter_keys, or filter on another key"
        )
    return key
