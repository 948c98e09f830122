"""Subcommands beyond the core ones; each module defines `add(subparsers) -> {name: handler}`.

A handler takes the parsed arguments and returns an exit status; raising ValueError (or a
debatekit error) prints one `debatekit: error: ...` line and exits 2.
"""
