"""The names an adapter author needs: candidates, the selection rules, and the engine.

An application needs none of these: it builds a retriever from an adapter
(``llama_index_thresholded``, ``langchain_thresholded``) and reads its
:class:`thresholded.Report`. A new adapter implements the
:class:`~thresholded.engine.Backend` protocol for its framework's store, describes
each store as a :class:`~thresholded.engine.Collection`, and runs a call with
``drive(retrieve(plan(...)))`` (``adrive`` when awaiting).
"""

from thresholded.attachments import AttachmentSpec
from thresholded.engine import (
    Backend,
    Call,
    Collection,
    Fan,
    Question,
    Result,
    adrive,
    drive,
    plan,
    retrieve,
)
from thresholded.selection import AttachedRole, Candidate, Dropped, Selection, attach, select

__all__ = [
    "AttachedRole",
    "AttachmentSpec",
    "Backend",
    "Call",
    "Candidate",
    "Collection",
    "Dropped",
    "Fan",
    "Question",
    "Result",
    "Selection",
    "adrive",
    "attach",
    "drive",
    "plan",
    "retrieve",
    "select",
]
