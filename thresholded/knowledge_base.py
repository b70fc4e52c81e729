"""A markdown knowledge base: documents with front matter, split into sections.

Each document starts with a YAML front-matter block (``source``, ``doc_type``,
``title``, ``summary``); each ``## `` heading starts one retrievable section.
The summary becomes the parent of the document's sections. Framework-free, so
both adapters index the same sections with the same ids.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

EXAMPLE_KNOWLEDGE_BASE = Path(__file__).resolve().parent / "example_knowledge_base"
"""The example support knowledge base and its MiniLM profile, shipped inside the package."""
EXAMPLE_COLLECTION = "example_support_kb"
"""The example's own collection name: its profile is refused for any other collection."""

_FRONT_MATTER = re.compile(r"\A---\s*\n(?P<meta>.*?)\n---\s*\n(?P<body>.*)\Z", re.DOTALL)
_HEADING = re.compile(r"^## +(?P<title>.+?)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Section:
    id: str
    heading: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class KnowledgeDocument:
    source: str
    title: str
    summary: str
    metadata: dict[str, Any]
    sections: tuple[Section, ...]

    @property
    def summary_id(self) -> str:
        return f"{self.source}#summary"

    @property
    def summary_text(self) -> str:
        """The text of the summary, the parent of the document's sections."""
        return f"{self.title}: {self.summary}"

    @property
    def summary_metadata(self) -> dict[str, Any]:
        """The metadata of the summary: the document's, as a section named ``summary``."""
        return {**self.metadata, "section": "summary"}

    def linked_sections(self) -> Iterator[tuple[Section, str | None, str | None]]:
        """Each section, with the ids of the sections before and after it (None: none)."""
        ids = [s.id for s in self.sections]
        for i, section in enumerate(self.sections):
            yield section, ids[i - 1] if i > 0 else None, ids[i + 1] if i + 1 < len(ids) else None


def load_knowledge_base(folder: str | Path = EXAMPLE_KNOWLEDGE_BASE) -> list[KnowledgeDocument]:
    """Read every ``*.md`` with front matter in ``folder`` (its README is skipped)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"knowledge base folder {folder} does not exist")
    documents = [
        parse_document(path.read_text(encoding="utf-8"), path.name)
        for path in sorted(folder.glob("*.md"))
        if path.name.lower() != "readme.md"
    ]
    if not documents:
        raise ValueError(f"no markdown documents with front matter in {folder}")
    return documents


def example_profile(profile: str | Path | None = None) -> Path:
    """The profile to retrieve from the example knowledge base with: ``profile``, or the
    knowledge base's own when it is None. One measured on another collection is refused
    (:class:`~thresholded.errors.ProfileError`) before anything is indexed: the example's
    sections are indexed into ``EXAMPLE_COLLECTION``."""
    if profile is None:
        return EXAMPLE_KNOWLEDGE_BASE / "threshold.json"
    from thresholded.errors import ProfileError
    from thresholded.profile import CalibrationProfile

    measured_on = CalibrationProfile.load(profile).collection
    if measured_on not in (None, EXAMPLE_COLLECTION):
        raise ProfileError(
            f"profile {profile} was measured for collection {measured_on!r}; the example "
            f"knowledge base is indexed as collection {EXAMPLE_COLLECTION!r}: give a profile "
            "measured on it, or leave the profile out to use the knowledge base's own"
        )
    return Path(profile)


def parse_document(text: str, name: str = "<text>") -> KnowledgeDocument:
    match = _FRONT_MATTER.match(text)
    if match is None:
        raise ValueError(f"{name}: no YAML front matter (a block between '---' lines)")
    meta = yaml.safe_load(match["meta"]) or {}
    missing = [key for key in ("source", "title", "summary") if not meta.get(key)]
    if missing:
        raise ValueError(f"{name}: front matter lacks {', '.join(missing)}")
    source = str(meta["source"])
    body = match["body"]
    headings = list(_HEADING.finditer(body))
    if not headings:
        raise ValueError(f"{name}: no '## ' sections")
    base = {k: v for k, v in meta.items() if k != "summary"}
    sections = []
    for i, heading in enumerate(headings):
        end = headings[i + 1].start() if i + 1 < len(headings) else len(body)
        content = body[heading.end() : end].strip()
        sections.append(
            Section(
                id=f"{source}#{i}",
                heading=heading["title"],
                text=f"{heading['title']}\n\n{content}",
                metadata={**base, "section": heading["title"]},
            )
        )
    return KnowledgeDocument(
        source=source,
        title=str(meta["title"]),
        summary=str(meta["summary"]),
        metadata=base,
        sections=tuple(sections),
    )
