"""The `debatekit` command: `app` parses the arguments and runs `run`, `datasets` and
`models`; each other module here is one more subcommand with `add(subparsers) -> {name: handler}`."""

from debatekit.cli.app import main

__all__ = ["main"]
