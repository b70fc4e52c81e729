"""Metadata filters, framework-free: one model, one meaning, one Milvus translation.

A filter is a tree: :class:`Condition` leaves (a key, an operator, a value) under
:class:`Group` nodes that combine their children with AND, OR or NOT ("none of").
:func:`matches` is the reference: what a filter means for one row's metadata.
:func:`to_milvus` writes a filter as a Milvus expression in the dialect of one
engine, with every key checked (:func:`check_key`) and every value a literal.
Adapters convert their framework's filters into this model (LlamaIndex
``MetadataFilters``, LangChain structured queries), so that both mean the same.
"""

from thresholded.errors import UnsafeFilterError
from thresholded.filters.evaluate import matches
from thresholded.filters.keys import RESERVED_WORDS, check_key
from thresholded.filters.milvus import (
    DeclaredFields,
    Dialect,
    MilvusFilter,
    client_dialect,
    dialect_of,
    to_milvus,
)
from thresholded.filters.model import (
    Combine,
    Condition,
    Filter,
    Group,
    Op,
    all_of,
    none_match,
)

__all__ = [
    "RESERVED_WORDS",
    "Combine",
    "Condition",
    "DeclaredFields",
    "Dialect",
    "Filter",
    "Group",
    "MilvusFilter",
    "Op",
    "UnsafeFilterError",
    "all_of",
    "check_key",
    "client_dialect",
    "dialect_of",
    "matches",
    "none_match",
    "to_milvus",
]
