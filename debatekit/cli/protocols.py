"""`debatekit protocols [NAME]`: the registered protocols as a table, or one of them in detail.

    debatekit protocols                   # name, paper or seed, one line each
    debatekit protocols society_of_mind   # its parameters with types and defaults, what --rounds sets
    debatekit protocols --schema dynamics # the JSON schema of its output

The documentation's protocol pages are built from the same functions (`overview`, `parameters`),
so the command and the pages cannot disagree.
"""

from __future__ import annotations

import inspect
import json
import shutil
import sys
import textwrap
import types
import typing
from typing import Any


def add(subparsers) -> dict:
    p = subparsers.add_parser("protocols", help="list protocols; `protocols NAME` shows one's parameters")
    p.add_argument("name", nargs="?", metavar="NAME", help="show this protocol's parameters, types and defaults")
    p.add_argument("--schema", metavar="NAME", help="print the JSON schema of protocol NAME's output")
    return {"protocols": cmd_protocols}


def cmd_protocols(args) -> int:
    from debatekit import registry

    if args.schema:
        spec = registry.get(args.schema)
        if spec.output is None:
            raise ValueError(f"protocol {args.schema!r} declares no output schema")
        print(json.dumps(spec.output.model_json_schema(), indent=2))
    elif args.name:
        print(details(registry.get(args.name)))
    else:
        print(table(overview()))
    return 0


def overview() -> list[dict]:
    """One row per registered protocol: name, paper (or seed, or where a plugin came from), description."""
    from debatekit import registry

    return [{"name": name, "paper": paper(spec), "description": spec.description}
            for name, spec in registry.available().items()]


def paper(spec) -> str:
    from debatekit import registry

    if spec.paper:
        return spec.paper
    return "-" if spec.source["kind"] == "builtin" else registry.describe(spec.source)


def parameters(spec) -> list[dict]:
    """Each parameter: name, type (from the validation schema, constraints included), default, and
    which generic flag (`--agents`, `--rounds`) sets it."""
    properties = spec.params_model().model_json_schema().get("properties", {})
    hints = inspect.get_annotations(spec.factory, eval_str=True)
    flags = {spec.flag(f): f"--{f}" for f in ("agents", "rounds") if spec.flag(f)}
    return [{"name": name, "type": type_text(properties.get(name, {}), hints.get(name)), "default": repr(p.default),
             "flag": flags.get(name, "")} for name, p in spec.params.items()]


def type_text(schema: dict, hint: Any = None) -> str:
    """A JSON schema in a few words: `integer 1..10`, `"text" | "json"`, `list of string`; where the
    schema says nothing (a parameter checked by its own validator), the annotation it was given."""
    if not set(schema) - {"title", "default", "description"} and hint is not None:
        return hint_text(hint)
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " | ".join(dict.fromkeys(type_text(s) for s in schema[key]))
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {type_text(schema.get('items', {}))}"
    if kind == "object":
        values = schema.get("additionalProperties")
        return f"mapping to {type_text(values)}" if isinstance(values, dict) else "mapping"
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    if low is not None or high is not None:
        excluded = [str(schema[k]) for k in ("exclusiveMinimum", "exclusiveMaximum") if k in schema]
        return (f"{kind} {'' if low is None else low}..{'' if high is None else high}"
                + (f" ({' and '.join(excluded)} excluded)" if excluded else ""))
    return kind


SCHEMA_WORDS = {int: "integer", float: "number", str: "string", bool: "boolean", type(None): "null"}


def hint_text(hint: Any) -> str:
    """A type annotation in the words `type_text` uses for schemas: `integer | list of string`."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return hint_text(args[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(dict.fromkeys(hint_text(a) for a in args))
    if origin is list and args:
        return f"list of {hint_text(args[0])}"
    if origin is dict and len(args) == 2:
        return f"mapping to {hint_text(args[1])}"
    if hint in SCHEMA_WORDS:
        return SCHEMA_WORDS[hint]
    return getattr(hint, "__name__", str(hint).replace("typing.", ""))


def table(rows: list[dict]) -> str:
    width = shutil.get_terminal_size((100, 20)).columns if sys.stdout.isatty() else 100
    name_w = max(len(r["name"]) for r in rows)
    paper_w = max(len(r["paper"]) for r in rows)
    rest = max(30, width - name_w - paper_w - 4)
    lines = [f"{'name':{name_w}}  {'paper or seed':{paper_w}}  what it does", ""]
    for r in rows:
        text = textwrap.wrap(r["description"], rest) or [""]
        lines.append(f"{r['name']:{name_w}}  {r['paper']:{paper_w}}  {text[0]}")
        lines += [f"{'':{name_w + paper_w + 4}}{more}" for more in text[1:]]
    lines += ["", "debatekit protocols NAME: its parameters, types and defaults"]
    return "\n".join(lines)


def details(spec) -> str:
    rows = parameters(spec)
    name_w = max([len(r["name"]) for r in rows] + [9])
    default_w = min(24, max([len(r["default"]) for r in rows] + [7]))
    lines = [f"{spec.name}: {spec.description}", f"paper or seed: {paper(spec)}",
             f"module: {spec.factory.__module__}", "",
             f"{'parameter':{name_w}}  {'default':{default_w}}  type"]
    for r in rows:
        flag = f"  (set by {r['flag']})" if r["flag"] else ""
        lines.append(f"{r['name']:{name_w}}  {r['default']:{default_w}}  {r['type']}{flag}")
    if spec.flag("rounds") is None:
        lines.append("--rounds does not apply to it")
    else:
        lines.append(f"--rounds sets {spec.flag('rounds')}: the most rounds a debate may run")
    if spec.output is not None:
        lines.append(f"\noutput: {spec.output.__name__} (debatekit protocols --schema {spec.name})")
    return "\n".join(lines)
