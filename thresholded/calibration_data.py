"""Calibration inputs: a corpus of passages, questions with their gold passages, a simple form.

The formats are JSON Lines (``data/README.md``) and, for teams without gold labels,
a YAML file with two plain lists. Loading checks what later maths relies on, so
an error names the file and line instead of surfacing as a wrong number.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "Passage",
    "Question",
    "SimpleForm",
    "is_simple_form",
    "load_corpus",
    "load_questions",
    "load_simple_form",
]


@dataclass(frozen=True)
class Passage:
    """One indexed section: what a search can return."""

    pid: str
    lang: str
    text: str
    group: str | None = None
    title: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class Question:
    """A question; with ``gold_pids`` it is answerable, without it is unrelated to the index."""

    qid: str
    lang: str
    question: str
    gold_pids: tuple[str, ...] = ()
    gold_group: str | None = None
    title: str | None = None
    origin: str = "queries"

    @property
    def answerable(self) -> bool:
        return bool(self.gold_pids)

    @property
    def article(self) -> str:
        """The group cross-validation keeps together, so no article is in train and test.

        Answerable questions belong to their article (title, else the gold group
        without its paragraph number); an unrelated question to its own title, else
        to itself, so unrelated sets without titles spread evenly over the folds.
        """
        if self.title:
            return f"{self.origin}:{self.title}" if not self.answerable else self.title
        if self.gold_group:
            head, sep, _ = self.gold_group.rpartition(":")
            return head if sep else self.gold_group
        return f"{self.origin}:{self.qid}"


@dataclass(frozen=True)
class SimpleForm:
    """Plain questions without gold: ones the index should answer and ones it should not."""

    should_match: tuple[str, ...]
    should_not_match: tuple[str, ...]


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} does not exist") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 text: {exc}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not valid JSON: {exc.msg}") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{number}: expected a JSON object per line")
        yield number, row


def _required_str(row: dict[str, Any], key: str, where: str) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: '{key}' must be a non-empty string, got {value!r}")
    return value


def _optional_str(row: dict[str, Any], key: str, where: str) -> str | None:
    value = row.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{where}: '{key}' must be a string or null, got {value!r}")


def load_corpus(path: str | Path) -> list[Passage]:
    """Read passages ``{pid, lang, text, [group, title, source]}``; pids must be unique."""
    path = Path(path)
    passages: list[Passage] = []
    seen: set[str] = set()
    for number, row in _read_jsonl(path):
        where = f"{path}:{number}"
        pid = _required_str(row, "pid", where)
        if pid in seen:
            raise ValueError(f"{where}: duplicate pid {pid!r}")
        seen.add(pid)
        passages.append(
            Passage(
                pid=pid,
                lang=_required_str(row, "lang", where),
                text=_required_str(row, "text", where),
                group=_optional_str(row, "group", where),
                title=_optional_str(row, "title", where),
                source=_optional_str(row, "source", where),
            )
        )
    if not passages:
        raise ValueError(f"{path} holds no passages")
    return passages


def _origin_of(path: Path) -> str:
    """Name a query set by its folder (``clinc-oos``), or by its file when it has none."""
    if path.stem.startswith("queries") and path.parent.name not in ("", "."):
        return path.parent.name
    return path.stem


def load_questions(path: str | Path, *, origin: str | None = None) -> list[Question]:
    """Read questions ``{qid, lang, question, gold_pids, [gold_group, title]}``.

    ``origin`` labels the set in reports (CLINC vs XQuAD near-miss); by default
    the file's folder, or a row's own ``origin`` field.
    """
    path = Path(path)
    default_origin = origin or _origin_of(path)
    questions: list[Question] = []
    for number, row in _read_jsonl(path):
        where = f"{path}:{number}"
        gold = row.get("gold_pids") or []
        if not isinstance(gold, list) or not all(isinstance(p, str) and p for p in gold):
            raise ValueError(f"{where}: 'gold_pids' must be a list of passage ids, got {gold!r}")
        gold_group = _optional_str(row, "gold_group", where)
        if gold_group is not None and not gold:
            raise ValueError(f"{where}: gold_group {gold_group!r} is set but gold_pids is empty")
        row_origin = _optional_str(row, "origin", where)
        questions.append(
            Question(
                qid=_required_str(row, "qid", where),
                lang=_required_str(row, "lang", where),
                question=_required_str(row, "question", where),
                gold_pids=tuple(gold),
                gold_group=gold_group,
                title=_optional_str(row, "title", where),
                origin=row_origin or default_origin,
            )
        )
    if not questions:
        raise ValueError(f"{path} holds no questions")
    return questions


def is_simple_form(path: str | Path) -> bool:
    """A ``.yaml``/``.yml`` file is the simple form; anything else is JSON Lines."""
    return Path(path).suffix.lower() in (".yaml", ".yml")


def load_simple_form(path: str | Path) -> SimpleForm:
    """Read ``should_match:`` and ``should_not_match:``, two lists of plain questions."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} does not exist") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping with 'should_match' and 'should_not_match'")
    unknown = set(data) - {"should_match", "should_not_match"}
    if unknown:
        raise ValueError(f"{path}: unknown keys {sorted(unknown)}")
    lists: dict[str, tuple[str, ...]] = {}
    for key in ("should_match", "should_not_match"):
        value = data.get(key) or []
        if not isinstance(value, list) or not all(isinstance(q, str) and q.strip() for q in value):
            raise ValueError(f"{path}: '{key}' must be a list of non-empty strings")
        lists[key] = tuple(q.strip() for q in value)
    if not lists["should_match"]:
        raise ValueError(f"{path}: 'should_match' needs at least one question")
    return SimpleForm(lists["should_match"], lists["should_not_match"])
