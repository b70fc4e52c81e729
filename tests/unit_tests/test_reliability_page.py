"""docs/reliability.md says what its tables hold: a heading's count is the table's rows, and
every test file a row names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "reliability.md"


def _sections() -> dict[str, str]:
    """Each ``## `` section of the page, by its heading."""
    parts = re.split(r"^## (.+)$", PAGE.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _rows(section: str) -> list[str]:
    """The body rows of the first table of a section (no header, no separator)."""
    lines = [line for line in section.splitlines() if line.startswith("|")]
    return lines[2:]


def test_a_heading_counting_cases_counts_its_table_rows() -> None:
    """The heading "Bad input: 23 cases" stood over a table of 25."""
    counted = {
        heading: int(match.group(1))
        for heading in _sections()
        if (match := re.search(r"(\d+) cases", heading))
    }
    assert counted, "no heading of docs/reliability.md counts its cases"
    sections = _sections()
    assert {h: len(_rows(sections[h])) for h in counted} == counted


def test_every_test_file_the_bad_input_table_names_exists() -> None:
    (heading,) = [h for h in _sections() if h.startswith("Bad input")]
    named = set(re.findall(r"`([\w/]+\.py)`", "\n".join(_rows(_sections()[heading]))))
    tests = [p.relative_to(ROOT / "tests").as_posix() for p in (ROOT / "tests").rglob("*.py")]
    missing = sorted(n for n in named if not any(t.endswith(n) for t in tests))
    assert not missing
