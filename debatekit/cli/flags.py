"""`debatekit run`'s flags for the settings of a run, derived from `RunConfig`: one flag per field
that maps one-to-one, `--field-name` with the type of its annotation and its docstring as help, so
that a setting added to `RunConfig` is a flag with no other edit. `RUN_FLAGS` holds the exceptions."""

from __future__ import annotations

import argparse
import os
import typing

RUN_FLAGS: dict[str, dict | None] = {
    "protocol": None,  # the positional PROTOCOL names: several are compared
    "call_timeout": {"flag": "--timeout", "metavar": "SECONDS"},
    "cache": {"help": "do not reuse cached replies"},
    "api_base": {"metavar": "URL"},
    "api_key_env": {"metavar": "NAME"},
}
"""Where a flag differs from what its `RunConfig` field gives by itself (`flag`, `help`, `metavar`), or
None for a field with no flag. A field that is not a number, text or yes/no has none either: protocol
parameters (`params`) come from `--set`, `--agents` and `--rounds`; `model_options` from Python or a grid.
A yes/no setting on by default is turned off by `--no-NAME`."""
SCALARS = (int, float, str, bool)


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def out_path(text: str) -> str:
    """An `--out` path: `~` expanded (the shell leaves `--out=~/x` as it is), an empty one refused
    (`--out "$DIR"` with DIR unset would write into the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path names no folder")
    return os.path.expanduser(text)


def add_config_flags(parser: argparse.ArgumentParser, config_type: type | None = None) -> None:
    """Add a flag for each field of `config_type` (default: `RunConfig`) that has one; a flag not given
    leaves its field at the model's default (`config_settings`)."""
    if config_type is None:
        from debatekit.records.schemas import RunConfig as config_type
    names = []
    for name, field in config_type.model_fields.items():
        how, kind = RUN_FLAGS.get(name, {}), scalar(field.annotation)
        if how is None or kind is None:
            continue
        options = {"dest": name, "help": how.get("help") or as_help(field.description)}
        if kind is bool:
            on = field.get_default()
            flag = how.get("flag") or f"--{'no-' if on else ''}{name.replace('_', '-')}"
            options.update(action="store_const", const=not on)
        else:
            flag = how.get("flag") or f"--{name.replace('_', '-')}"
            at_least_one = any(getattr(rule, "ge", None) == 1 for rule in field.metadata)
            options.update(type=positive if kind is int and at_least_one else kind, required=field.is_required())
            if "metavar" in how:
                options["metavar"] = how["metavar"]
        parser.add_argument(flag, **options)
        names.append(name)
    parser.set_defaults(config_fields=tuple(names))


def config_settings(args: argparse.Namespace) -> dict:
    """The run settings the command line gives, by `RunConfig` field name (those not given left out)."""
    return {name: getattr(args, name) for name in args.config_fields if getattr(args, name) is not None}


def scalar(annotation) -> type | None:
    """The one number, text or yes/no type of a field (`int | None`: int), or None."""
    kinds = [a for a in typing.get_args(annotation) or (annotation,) if a is not type(None)]
    return kinds[0] if len(kinds) == 1 and kinds[0] in SCALARS else None


def as_help(doc: str | None) -> str:
    """A field's docstring as a flag's help: one line, lower case first, no closing full stop."""
    text = " ".join((doc or "").split()).removesuffix(".")
    return (text[:1].lower() + text[1:]).replace("%", "%%")
