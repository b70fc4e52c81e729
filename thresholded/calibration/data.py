"""Calibration inputs: a corpus of passages, questions with their gold passages, a simple form.

The formats are JSON Lines (``data/README.md``) and, for teams without gold labels,
a YAML file with two plain lists (a should-match entry may name its gold section).
Loading checks what later maths relies on, so an error names the file and line
instead of surfacing as a wrong number.
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
    "same_text",
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
    """Plain questions: ones the index should answer and ones it should not.

    ``gold`` has one entry per should-match question: the id or source of the
    section that answers it, or None.
    """

    should_match: tuple[str, ...]
    should_not_match: tuple[str, ...]
    gold: tuple[str | None, ...] = ()

    def __post_init__(self) -> None:
        if not self.gold:
            object.__setattr__(self, "gold", (None,) * len(self.should_match))
        if len(self.gold) != len(self.should_match):
            raise ValueError("gold needs one entry per should-match question")
        should = {same_text(q): q for q in self.should_match}
        both = next((q for q in self.should_not_match if same_text(q) in should), None)
        if both is not None:
            raise ValueError(
                f"{should[same_text(both)]!r} is in should_match and in should_not_match: a "
                "question is answerable or not, so the gate cannot both keep and empty it; "
                "remove it from one list"
            )


def same_text(question: str) -> str:
    """A question's text as compared for duplicates: its words, whatever the spacing."""
    return " ".join(question.split())


def _read_jsonl(path: Path, expected: str) -> Iterator[tuple[int, dict[str, Any]]]:
    if path.is_dir():
        raise ValueError(
            f"{path} is a folder: expected a JSON Lines file of {expected}, one JSON object "
            "a line (to calibrate on what a collection already holds, use --milvus-collection)"
        )
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} does not exist") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 text: {exc}") from None
    first = True
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            if first:
                raise ValueError(
                    f"{path} is not JSON Lines (line {number}: {exc.msg}): expected {expected}, "
                    "one JSON object a line, not plain text"
                ) from None
            raise ValueError(f"{path}:{number}: not valid JSON: {exc.msg}") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{number}: expected a JSON object per line")
        first = False
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


UNDETERMINED = "und"
"""The language of a corpus that names none (BCP 47 for "undetermined")."""


def _corpus_language(path: Path, rows: list[tuple[int, dict[str, Any]]]) -> str:
    """The one language of a corpus whose rows may omit ``lang``; an error when ambiguous."""
    stated = {row["lang"] for _, row in rows if isinstance(row.get("lang"), str) and row["lang"]}
    missing = next((number for number, row in rows if row.get("lang") is None), None)
    if missing is not None and len(stated) > 1:
        raise ValueError(
            f"{path}:{missing}: 'lang' is missing and the corpus has several languages "
            f"({sorted(stated)}): give every passage its 'lang'"
        )
    return next(iter(stated), UNDETERMINED)


def load_corpus(path: str | Path) -> list[Passage]:
    """Read passages ``{pid, text, [lang, group, title, source]}``; pids must be unique.

    ``lang`` may be left out when the corpus has one language: a passage without it
    takes the language the others state, or ``und`` when none does.
    """
    path = Path(path)
    passages: list[Passage] = []
    seen: set[str] = set()
    rows = list(_read_jsonl(path, "passages {pid, text, [lang, source, title]}"))
    language = _corpus_language(path, rows)
    for number, row in rows:
        where = f"{path}:{number}"
        pid = _required_str(row, "pid", where)
        if pid in seen:
            raise ValueError(f"{where}: duplicate pid {pid!r}")
        seen.add(pid)
        passages.append(
            Passage(
                pid=pid,
                lang=language if row.get("lang") is None else _required_str(row, "lang", where),
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
    for number, row in _read_jsonl(path, "questions {qid, lang, question, gold_pids}"):
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


def _entry(value: Any, key: str, path: Path) -> tuple[str, str | None]:
    """A plain question, or (should_match only) ``{question: ..., gold: id or source}``."""
    if isinstance(value, str) and value.strip():
        return value.strip(), None
    if key == "should_match" and isinstance(value, dict) and set(value) <= {"question", "gold"}:
        question, gold = value.get("question"), value.get("gold")
        if (
            isinstance(question, str)
            and question.strip()
            and (gold is None or (isinstance(gold, str) and gold.strip()))
        ):
            return question.strip(), gold.strip() if gold else None
    form = "non-empty strings" + (" or {question, gold}" if key == "should_match" else "")
    raise ValueError(f"{path}: '{key}' must be a list of {form}, got {value!r}")


def load_simple_form(path: str | Path) -> SimpleForm:
    """Read ``should_match:`` and ``should_not_match:``, two lists of plain questions.

    A should-match entry may also be ``{question: ..., gold: ...}``, ``gold`` naming
    the section that answers it by id or by source: then the floor is measured.
    """
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
    lists: dict[str, list[tuple[str, str | None]]] = {}
    for key in ("should_match", "should_not_match"):
        value = data.get(key) or []
        if not isinstance(value, list):
            raise ValueError(f"{path}: '{key}' must be a list, got {value!r}")
        lists[key] = [_entry(item, key, path) for item in value]
    if not lists["should_match"]:
        raise ValueError(f"{path}: 'should_match' needs at least one question")
    return SimpleForm(
        tuple(q for q, _ in lists["should_match"]),
        tuple(q for q, _ in lists["should_not_match"]),
        tuple(g for _, g in lists["should_match"]),
    )
