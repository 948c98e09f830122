"""A small rule engine: formal rules evaluated in code on an item's structured `facts` (S0.10).

A rule set is a JSON list shipped next to a dataset (`datasets/legal_rules.json`). Each rule
has an id, a statement, a `condition` and a `conclusion`. The condition maps dotted paths into
the facts to expected values:

    {"community": "minangkabau", "property.origin": "ancestral"}
    {"marriage.spouses.age_at_marriage": {"lt": 19}, "marriage.dispensation": false}

- a scalar must equal the fact (booleans compare as booleans), a list means "one of",
  a dict holds operators (`eq ne lt lte gt gte in not_in exists`); a missing or null fact
  fails every test except `exists: false`;
- where a path crosses a list of objects (`property`, `heirs`, `marriage.spouses`), the
  conditions under that list must all hold for the same element: R-MIN-2 fires for one
  property that is both bought and bawaan, not for one bought and another bawaan. The
  elements that satisfied the rule are reported by name.

A rule that fires becomes a `RuleResult`, citable by its id like a context passage.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

OPERATORS = {
    "eq": lambda v, x: _equal(v, x),
    "ne": lambda v, x: v is not None and not _equal(v, x),
    "exists": lambda v, x: (v is not None) is bool(x),
    "lt": lambda v, x: v is not None and v < x,
    "lte": lambda v, x: v is not None and v <= x,
    "gt": lambda v, x: v is not None and v > x,
    "gte": lambda v, x: v is not None and v >= x,
    "in": lambda v, x: any(_equal(v, o) for o in x),
    "not_in": lambda v, x: not any(_equal(v, o) for o in x),
}


class RuleError(ValueError):
    """A rule file cannot be used; the message names the file and the rule."""


class Rule(BaseModel):
    """One formal rule of a dataset's rule set."""

    model_config = ConfigDict(extra="forbid")

    id: str
    """Citable id, e.g. `R-MIN-1`."""
    community: str
    """Legal community the rule belongs to (minangkabau, bali, java, national)."""
    statement: str
    """The rule in words."""
    condition: dict[str, Any]
    """Dotted fact paths -> expected value, list of values, or operator dict."""
    conclusion: str
    """What follows when the condition holds."""
    source: str
    """Where the rule comes from."""


class RuleResult(BaseModel):
    """A rule that fired on an item's facts: evidence citable by the rule id."""

    id: str
    statement: str
    conclusion: str
    source: str
    matched: list[str] = []
    """Names of the fact elements (property, heirs, ...) the rule matched."""

    def render(self, chars: int | None = None) -> str:
        on = f" (applies to: {'; '.join(self.matched)})" if self.matched else ""
        text = f"{self.conclusion}{on}"
        return text if chars is None or len(text) <= chars else text[: chars - 3] + "..."


def resolve(name_or_path: str) -> Path:
    """A rule file given its shipped name (`legal_rules`) or a path."""
    from debatekit.datasets import DatasetError, datasets_dir, locate

    shipped = sorted(p.stem for p in datasets_dir().glob("*.json") if p.name != "catalog.json")
    try:
        return locate(name_or_path, ".json", "rule set", shipped)
    except DatasetError as exc:
        raise RuleError(str(exc)) from None


def load(name_or_path: str) -> list[Rule]:
    """Load and check a rule set (unknown operators and duplicate ids are errors)."""
    path = resolve(name_or_path)
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
        rules = [Rule.model_validate(row) for row in rows]
    except (ValueError, TypeError) as exc:
        detail = exc.errors()[0] if isinstance(exc, ValidationError) else exc
        raise RuleError(f"{path}: {detail}") from exc
    seen: set[str] = set()
    for rule in rules:
        if rule.id in seen:
            raise RuleError(f"{path}: duplicate rule id {rule.id!r}")
        seen.add(rule.id)
        for key, expected in rule.condition.items():
            if isinstance(expected, dict) and (bad := set(expected) - set(OPERATORS)):
                raise RuleError(f"{path}: rule {rule.id}, condition {key!r}: unknown operator {sorted(bad)}")
    return rules


def evaluate(rules: list[Rule], facts: dict[str, Any]) -> list[RuleResult]:
    """The rules whose condition holds on `facts`, in rule order."""
    results = []
    for rule in rules:
        matched = match(facts, rule.condition)
        if matched is not None:
            results.append(RuleResult(id=rule.id, statement=rule.statement, conclusion=rule.conclusion,
                                      source=rule.source, matched=matched))
    return results


def match(node: Any, condition: dict[str, Any]) -> list[str] | None:
    """None if the condition fails on `node`; else the names of the list elements it bound."""
    groups: dict[str, dict[str, Any]] = {}
    for path, expected in condition.items():
        head, _, rest = path.partition(".")
        groups.setdefault(head, {})[rest] = expected
    bound: list[str] = []
    for head, sub in groups.items():
        value = node.get(head) if isinstance(node, dict) else None
        found = _match_value(value, sub)
        if found is None:
            return None
        bound.extend(found)
    return bound


def _match_value(value: Any, sub: dict[str, Any]) -> list[str] | None:
    leaf = {k: v for k, v in sub.items() if k == ""}
    deeper = {k: v for k, v in sub.items() if k != ""}
    if isinstance(value, list):
        names = []
        for index, element in enumerate(value):
            if _match_value(element, sub) is not None:
                names.append(str(element.get("name", index)) if isinstance(element, dict) else str(element))
        return names or None
    if leaf and not _test(value, leaf[""]):
        return None
    if deeper:
        if not isinstance(value, dict):  # a path through a null object: only `exists: false` holds
            return [] if all(_test(None, e) for e in deeper.values()) else None
        return match(value, deeper)
    return []


def _test(value: Any, expected: Any) -> bool:
    if isinstance(expected, dict):
        try:
            return all(OPERATORS[op](value, arg) for op, arg in expected.items())
        except TypeError:  # comparing incomparable facts (text with a number) is a non-match
            return False
    if isinstance(expected, list):
        return any(_equal(value, option) for option in expected)
    return _equal(value, expected)


def _equal(value: Any, expected: Any) -> bool:
    if isinstance(expected, bool) or isinstance(value, bool):
        return value is expected
    return value == expected
