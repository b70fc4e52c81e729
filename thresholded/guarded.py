"""State guarded by a lock, which a copy of a retriever copies with a lock of its own.

A lock cannot be copied (``copy.deepcopy`` of a retriever failed: "cannot pickle
'_thread.lock' object"), and must not be shared by two objects that no longer share
their state.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, ClassVar

__all__ = ["Guarded"]


class Guarded:
    """An object whose ``_lock`` guards its state. A copy (``copy.copy``,
    ``copy.deepcopy``, pickling) gets a new lock, and the attributes ``_not_copied``
    names start again from their factories."""

    _not_copied: ClassVar[dict[str, Callable[[], Any]]] = {}

    def __getstate__(self) -> dict[str, Any]:
        left_out = {"_lock", *self._not_copied}
        return {k: v for k, v in self.__dict__.items() if k not in left_out}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        for name, factory in self._not_copied.items():
            setattr(self, name, factory())
