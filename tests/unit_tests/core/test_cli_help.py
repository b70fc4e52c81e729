"""``thresholded COMMAND --help`` shows the default of every option that has one."""

from __future__ import annotations

import argparse
import re

import pytest

from thresholded.cli import COMMANDS, build_parser


def command_parser(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def line_of(help_text: str, option: str) -> str:
    """The help of ``option``, on one line (a long invocation puts it on the next one)."""
    lines = help_text.splitlines()
    own = re.compile(rf"\s*{re.escape(option)}[\s,]")
    start = next(i for i, line in enumerate(lines) if own.match(line + " "))
    block = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("   ") or line.lstrip().startswith("-"):
            break
        block.append(line)
    return " ".join(" ".join(block).split())


def shown_defaults(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The options whose default says something: not None, not a switch, not empty."""
    return [
        a
        for a in parser._actions
        if a.option_strings
        and a.default not in (None, "", argparse.SUPPRESS)
        and not isinstance(a.default, bool)
    ]


def test_calibrate_help_shows_the_folds_and_batch_size_defaults(monkeypatch):
    """They were shown without: ``--folds FOLDS  cross-validation folds (articles)``."""
    monkeypatch.setenv("COLUMNS", "1000")
    help_text = command_parser("calibrate").format_help()
    assert line_of(help_text, "--folds").endswith("cross-validation folds (articles) (default: 8)")
    assert line_of(help_text, "--batch-size").endswith("(default: 32)")


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_with_a_default_shows_it(monkeypatch, name):
    monkeypatch.setenv("COLUMNS", "1000")
    parser = command_parser(name)
    help_text = parser.format_help()
    options = shown_defaults(parser)
    assert options
    for action in options:
        line = line_of(help_text, action.option_strings[0])
        assert "(default: " in line, line


@pytest.mark.parametrize("name", COMMANDS)
def test_no_help_shows_the_source_s_markup(monkeypatch, name):
    """``thresholded bench --help`` began "``thresholded bench``: what a threshold keeps",
    the module docstring's reStructuredText backquotes."""
    monkeypatch.setenv("COLUMNS", "1000")
    assert "``" not in command_parser(name).format_help()
