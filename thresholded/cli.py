"""The ``thresholded`` command line: each subcommand lives in ``thresholded.commands``.

Subcommand modules import the framework adapters lazily, inside ``run``, so the
core stays free of LlamaIndex and LangChain and ``--help`` works on any install; a
command whose extra is missing says which one to install (``thresholded.extras``).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from thresholded.errors import ThresholdedError

COMMANDS = ("demo", "calibrate", "bench")


class DefaultsShown(argparse.HelpFormatter):
    """Help that ends each option's text with its default, where it has one that says
    something (not None, a switch's False or an empty string) and the text does not give
    it already."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "(default" in text
            or default in (None, "", argparse.SUPPRESS)
            or isinstance(default, bool)
            or not action.option_strings
        ):
            return action.help
        return f"{text} (default: %(default)s)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="thresholded",
        description="Cosine-thresholded dense retrieval: drop what is clearly unrelated.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"thresholded.commands.{name}").register(sub)
    for command in sub.choices.values():
        command.formatter_class = DefaultsShown
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.run(args) or 0)
    except (ThresholdedError, FileExistsError, FileNotFoundError, ValueError) as exc:
        print(f"thresholded {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
