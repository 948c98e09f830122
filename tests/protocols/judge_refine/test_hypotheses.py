"""Pure logic of judge_refine: judge order, agreement/consensus, keyword match, key lines, report helpers."""

import pytest

from debatekit.protocols.judge_refine.hypotheses import (
    agree, components_overlap, consensus, display_name, judge_order, key_log_lines, keyword_match,
    resolution_steps)


def h(category, *components):
    return {"category": category, "affected_components": list(components)}


@pytest.mark.parametrize("a, b, same", [
    (["DataNode dn-07"], ["dn-07"], True),                 # one contains the other
    (["dn-07 /data/3"], ["/data/3 volume"], True),         # a shared specific word
    (["PostgreSQL"], ["postgresql primary"], True),        # case-insensitive
    (["api server"], ["db server"], False),                # only a generic word in common
    (["NameNode"], ["DataNode"], False),
    ([], ["dn-07"], False),
    (["  "], ["dn-07"], False),
])
def test_components_overlap(a, b, same):
    assert components_overlap(a, b) is same


@pytest.mark.parametrize("tops, agreed", [
    ({"a": h("resource", "dn-07"), "b": h("resource", "DataNode dn-07"), "c": h("resource", "dn-07 disk")}, True),
    ({"a": h("resource", "dn-07"), "b": h("hardware", "dn-07")}, False),        # category differs
    ({"a": h("resource", "dn-07"), "b": h("resource", "dn-09")}, False),        # components differ
    ({"a": h("resource", "dn-07"), "b": None}, False),                          # a reasoner has none
    ({"a": h("resource", "dn-07")}, False),                                     # one reasoner: no consensus
    ({"a": h("network", "conntrack"), "b": h("network", "nf_conntrack table", "node-3")}, True),
])
def test_consensus(tops, agreed):
    assert consensus(tops) is agreed


def test_agree_is_symmetric():
    x, y = h("config", "cert-manager"), h("config", "cert-manager issuer", "route53")
    assert agree(x, y) and agree(y, x)


def test_judge_order_is_a_seeded_permutation_with_neutral_labels():
    sources = [(r, i) for r in ("log", "kg", "hybrid") for i in range(3)]
    order = judge_order(sources, 0, "inc-001", 1)
    assert [o["label"] for o in order] == [f"H{i}" for i in range(1, 10)]
    assert sorted((o["source"], o["index"]) for o in order) == sorted(sources)
    assert order == judge_order(sources, 0, "inc-001", 1)
    assert [(o["source"], o["index"]) for o in order] != sources
    assert judge_order(sources, 0, "inc-001", 2) != order and judge_order(sources, 1, "inc-001", 1) != order
    assert [(o["source"], o["index"]) for o in judge_order(sources, 0, "x", 1, shuffle=False)] == sources
    assert judge_order([], 0, "x", 1) == []


@pytest.mark.parametrize("text, keywords, ok, groups", [
    ("DataNode dn-07 volume full", [["disk full", "volume full"], "datanode"], True, [True, True]),
    ("DATANODE ran out of space", [["disk full", "out of space"], "datanode"], True, [True, True]),
    ("NameNode GC pauses", [["disk full", "out of space"], "datanode"], False, [False, False]),
    ("disk full on the NameNode", [["disk full"], "datanode"], False, [True, False]),
    ("anything", [], False, []),
])
def test_keyword_match(text, keywords, ok, groups):
    assert keyword_match(text, keywords) == (ok, groups)


def test_key_log_lines_keeps_errors_first_and_last_and_cuts_long_lines():
    logs = "\n".join([f"INFO fine {i}" for i in range(3)] + [f"ERROR bad {i}" for i in range(6)]
                     + ["WARN " + "x" * 300])
    assert key_log_lines(logs, 20)[:6] == [f"ERROR bad {i}" for i in range(6)]
    assert len(key_log_lines(logs, 20)[-1]) == 220
    picked = key_log_lines(logs, 4)
    assert picked[:2] == ["ERROR bad 0", "ERROR bad 1"] and picked[2] == "ERROR bad 5" and len(picked) == 4
    assert key_log_lines("INFO all good", 5) == []


@pytest.mark.parametrize("text, steps", [
    ("1. Free space 2. Throttle replication 3) Alert at 85%", ["Free space", "Throttle replication", "Alert at 85%"]),
    ("Free space; throttle replication", ["Free space", "throttle replication"]),
    ("Free space. Add disks.", ["Free space.", "Add disks."]),
    ("", []),
])
def test_resolution_steps(text, steps):
    assert resolution_steps(text) == steps


def test_display_names_follow_the_seed():
    assert [display_name(n) for n in ("log_focused", "kg_focused", "hybrid")] == ["Log-Focused", "KG-Focused", "Hybrid"]
