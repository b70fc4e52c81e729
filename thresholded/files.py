"""Stored files: JSON read strictly, every file written atomically.

Policies, profiles, benchmark results and calibration plots go through here.
Python's ``json`` keeps the last of two equal keys, so ``{"min_similarity": 0.2,
"min_similarity": 0.9}`` would load as 0.9 without a word; here it is an error.
A write goes to a temporary file beside the target, is flushed to disk, and is
renamed over the target in one step: a crash, a full disk or a kill mid-write
leaves the old file as it was, never half a new one.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any


class DuplicateKeyError(ValueError):
    """A JSON object names the same key twice."""

    def __init__(self, key: str) -> None:
        super().__init__(
            f"the key {key!r} appears more than once in one object; JSON would silently "
            "keep the last one: keep only the value you mean"
        )
        self.key = key


def loads_strict(text: str | bytes) -> Any:
    """``json.loads``, refusing any object that repeats a key (``DuplicateKeyError``)."""
    return json.loads(text, object_pairs_hook=_unique_keys)


def _unique_keys(pairs: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise DuplicateKeyError(key)
        data[key] = value
    return data


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` all at once or not at all: see :func:`atomic_write`."""
    atomic_write(path, lambda handle: handle.write(text.encode("utf-8")))


def atomic_write(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Have ``write`` fill ``path`` all at once or not at all.

    ``write`` gets a binary file: a temporary one in the same directory (so the
    rename cannot cross file systems). It is fsynced and replaces ``path`` with
    ``os.replace``. On any failure the temporary file is removed and ``path``
    keeps its old content. The file gets the usual permissions (0666 less the
    umask), not the temporary file's 0600.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
