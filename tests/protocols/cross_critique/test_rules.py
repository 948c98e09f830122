"""The rule engine (S0.10): conditions evaluated in code on structured facts; table-driven."""

import json

import pytest

from debatekit.protocols.cross_critique import rules
from debatekit.protocols.cross_critique.rules import Rule

FACTS = {
    "community": "minangkabau", "religion": "islam",
    "deceased": {"children_count": 0},
    "property": [
        {"name": "sawah", "type": "sawah", "origin": "ancestral",
         "transaction": {"type": "gadai", "years_elapsed": 9}},
        {"name": "shophouse", "type": "shophouse", "origin": "bawaan", "acquired_by": "purchase", "transaction": None},
        {"name": "house", "type": "house", "origin": "acquired_in_marriage", "acquired_by": "inheritance"},
    ],
    "marriage": {"same_suku": False, "dispensation": False,
                 "spouses": [{"name": "Siti", "age_at_marriage": 17}, {"name": "Budi", "age_at_marriage": 25}]},
}


@pytest.mark.parametrize("condition, expected", [
    ({"community": "minangkabau"}, []),
    ({"community": "bali"}, None),
    ({"community": ["bali", "minangkabau"]}, []),
    ({"property.origin": "ancestral"}, ["sawah"]),
    ({"property.origin": ["bawaan", "acquired_in_marriage"]}, ["shophouse", "house"]),
    # conditions under one list bind the same element: no property is both bawaan and inherited
    ({"property.origin": "bawaan", "property.acquired_by": "inheritance"}, None),
    ({"property.origin": "bawaan", "property.acquired_by": ["purchase", "earnings"]}, ["shophouse"]),
    ({"property.transaction.type": "gadai", "property.transaction.years_elapsed": {"gte": 7}}, ["sawah"]),
    ({"property.transaction.years_elapsed": {"gte": 10}}, None),
    ({"property.transaction.type": "sale"}, None),  # a null transaction never matches
    ({"marriage.same_suku": True}, None),
    ({"marriage.same_suku": False}, []),
    ({"marriage.spouses.age_at_marriage": {"lt": 19}, "marriage.dispensation": False}, ["Siti"]),
    ({"marriage.spouses.age_at_marriage": {"lt": 16}}, None),
    ({"deceased.children_count": 0}, []),
    ({"deceased.children_count": False}, None),  # booleans compare as booleans, not as 0
    ({"religion": {"ne": "islam"}}, None),
    ({"religion": {"not_in": ["hindu", "catholic"]}}, []),
    ({"property.area_m2": {"gt": 100}}, None),  # a missing fact is a non-match
    ({"property.area_m2": {"ne": 100}}, None),  # ... for `ne` too
    ({"property.area_m2": {"exists": False}}, ["sawah", "shophouse", "house"]),
    ({"property.transaction.type": {"exists": False}}, ["shophouse", "house"]),  # through null / missing
    ({"property.transaction.type": {"exists": True}}, ["sawah"]),
    ({"deceased.children_count": {"exists": True}}, []),
])
def test_match(condition, expected):
    assert rules.match(FACTS, condition) == expected


def rule(id, condition):
    return Rule(id=id, community="x", statement="s", condition=condition, conclusion=f"c {id}", source="src")


def test_evaluate_returns_fired_rules_citable_by_id():
    fired = rules.evaluate([rule("R-1", {"property.origin": "ancestral"}), rule("R-2", {"community": "bali"}),
                            rule("R-3", {"property.type": "sawah", "property.transaction.years_elapsed": {"gte": 7}})],
                           FACTS)
    assert [(r.id, r.matched) for r in fired] == [("R-1", ["sawah"]), ("R-3", ["sawah"])]
    assert fired[0].render() == "c R-1 (applies to: sawah)"


def test_load_checks_operators_and_duplicates(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps([rule("R-1", {"a": {"about": 3}}).model_dump()]))
    with pytest.raises(rules.RuleError, match="unknown operator"):
        rules.load(str(path))
    path.write_text(json.dumps([rule("R-1", {}).model_dump()] * 2))
    with pytest.raises(rules.RuleError, match="duplicate rule id 'R-1'"):
        rules.load(str(path))
    path.write_text(json.dumps([{"id": "R-1"}]))
    with pytest.raises(rules.RuleError, match="r.json"):
        rules.load(str(path))
    with pytest.raises(rules.RuleError, match="unknown rule set"):
        rules.load("no_such_rules")


def test_shipped_rules_fire_on_the_shipped_dataset():
    shipped = rules.load("legal_rules")
    rows = [json.loads(line) for line in open(rules.resolve("legal_rules").with_name("legal_conflicts.jsonl"))]
    fired = {row["id"]: [r.id for r in rules.evaluate(shipped, row["facts"])] for row in rows}
    assert sum(bool(ids) for ids in fired.values()) >= len(rows) // 2
    assert {r.id for r in shipped} >= {i for ids in fired.values() for i in ids}
