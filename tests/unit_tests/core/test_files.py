"""Stored files: written all at once or not at all; JSON read strictly."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from thresholded import CalibrationProfile, RetrievalPolicy
from thresholded.files import DuplicateKeyError, atomic_write, atomic_write_text, loads_strict

SAVE_UNDER_A_SIZE_LIMIT = """
import resource, signal, sys
from thresholded import CalibrationProfile, RetrievalPolicy

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (150, 150))  # a full disk, after 150 bytes
kind, path = sys.argv[1], sys.argv[2]
if kind == "policy":
    RetrievalPolicy(min_similarity=0.9, embedding_model="minilm@384").save(path)
else:
    CalibrationProfile(
        version=1, min_similarity=0.9, embedding_model="minilm@384", provenance="x" * 200
    ).save(path, force=True)
"""


def save_under_a_size_limit(kind: str, path: Path) -> subprocess.CompletedProcess[str]:
    """Save a policy or profile over ``path`` in a process that may write 150 bytes per file."""
    return subprocess.run(
        [sys.executable, "-c", SAVE_UNDER_A_SIZE_LIMIT, kind, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_policy_save_that_hits_a_full_disk_leaves_the_old_policy(tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    RetrievalPolicy(min_similarity=0.33).save(path)
    before = path.read_bytes()
    done = save_under_a_size_limit("policy", path)
    assert done.returncode != 0 and "File too large" in done.stderr, done.stderr
    assert path.read_bytes() == before
    assert RetrievalPolicy.load(path).min_similarity == 0.33
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy.json"]


def test_a_profile_save_that_hits_a_full_disk_leaves_the_old_profile(tmp_path: Path) -> None:
    path = tmp_path / "profile.json"
    CalibrationProfile(version=1, min_similarity=0.33, embedding_model="minilm@384").save(path)
    before = path.read_bytes()
    done = save_under_a_size_limit("profile", path)
    assert done.returncode != 0 and "File too large" in done.stderr, done.stderr
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile.json"]


def test_a_policy_save_that_fails_at_the_rename_leaves_the_old_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from thresholded import files

    path = tmp_path / "policy.json"
    RetrievalPolicy(min_similarity=0.33).save(path)
    before = path.read_bytes()

    def crash(src: str, dst: str) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(files.os, "replace", crash)
    with pytest.raises(OSError, match="disk gone"):
        RetrievalPolicy(min_similarity=0.9).save(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy.json"]


def test_atomic_write_creates_missing_folders(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "policy.json"
    atomic_write_text(path, "{}\n")
    assert path.read_text(encoding="utf-8") == "{}\n"


def test_a_written_file_gets_the_usual_permissions_not_the_temporary_files(
    tmp_path: Path,
) -> None:
    umask = os.umask(0o022)
    try:
        path = tmp_path / "plot.png"
        atomic_write(path, lambda handle: handle.write(b"\x89PNG"))
    finally:
        os.umask(umask)
    assert path.read_bytes() == b"\x89PNG"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


@pytest.mark.parametrize(
    "text",
    [
        '{"min_similarity": 0.2, "min_similarity": 0.9}',
        '{"measurements": {"a": 1, "a": 2}}',
        '[{"k": 1, "k": 1}]',
    ],
    ids=["top-level", "nested", "in-a-list"],
)
def test_a_repeated_key_is_refused_wherever_it_is(text: str) -> None:
    assert json.loads(text)  # Python's json would keep the last value silently
    with pytest.raises(DuplicateKeyError, match="appears more than once") as caught:
        loads_strict(text)
    assert caught.value.key in {"min_similarity", "a", "k"}


def test_distinct_keys_load_as_json_does() -> None:
    text = '{"a": 1, "b": {"a": 2}, "c": [{"a": 3}], "d": true, "e": null}'
    assert loads_strict(text) == json.loads(text)
