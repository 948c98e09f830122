"""The `debatekit` command: `app` parses the arguments and runs `run`, `compare`, `models`,
`protocols` and `explore`; each other module here is one more subcommand with
`add(subparsers) -> {name: handler}`."""

from debatekit.cli.app import main

__all__ = ["main"]
