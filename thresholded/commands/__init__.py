"""Subcommands of the ``thresholded`` CLI; each module has ``register(subparsers)``."""
