"""The committed GSM8K forks: their summary (quoted by docs/guides/forks.md) is what their runs give."""

import importlib.util
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "results" / "forks" / "gsm8k"


def _summary_and_page(heading: str) -> tuple[dict, str]:
    """The committed summary, and docs/guides/forks.md from `heading` on with its lines joined."""
    summary = json.loads((HERE / "summary.json").read_text(encoding="utf-8"))
    page = (ROOT / "docs" / "guides" / "forks.md").read_text(encoding="utf-8")
    return summary, " ".join(page.split(heading, 1)[1].split())


def test_the_committed_fork_summary_is_recomputed_from_the_committed_runs():
    spec = importlib.util.spec_from_file_location("fork_summary", HERE / "summarise.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = json.loads((HERE / "summary.json").read_text(encoding="utf-8"))
    assert module.summarise() == committed
    assert committed["items"] >= 10 and set(committed["against_control"]) == {"adversarial-agent1", "correct-agent1"}


def test_the_page_quotes_the_committed_summary():
    """docs/guides/forks.md reports the forks' sizes and accuracies: they must be summary.json's, not an older run's."""
    summary, section = _summary_and_page("## Three forks of the GSM8K debate")
    runs, against = summary["runs"], summary["against_control"]

    size = re.search(r"Each of the three forks covers all (\d+) of the parent's items", section)
    assert size, "the page no longer says how many items each fork has run"
    parent_items = len({json.loads(line)["item_id"] for line in
                        (ROOT / summary["parent"] / "debates.jsonl").open(encoding="utf-8")})
    assert [runs[name]["debates"] for name in ("identity", "adversarial-agent1", "correct-agent1")] == \
        [int(size.group(1))] * 3 == [parent_items] * 3

    parent = summary["identity_vs_parent"]
    assert f"(identity against its parent, {parent['pairs']} items): accuracy of the final majority " \
           f"{parent['accuracy']:.2f} against {parent['baseline_accuracy']:.2f}" in section

    quoted = [int(n) for n in re.findall(r"\*\*[^*]+\*\* \((\d+) items\)", section)]
    assert quoted == [against["adversarial-agent1"]["items"], against["correct-agent1"]["items"]]
    adversary = against["adversarial-agent1"]["accuracy"]
    assert f"Final accuracy {adversary['accuracy']:.2f} against {adversary['baseline_accuracy']:.2f}" in section
    correct = against["correct-agent1"]["accuracy"]
    pairs = correct["pairs"]
    assert (f"right on {round(correct['accuracy'] * pairs)} of {pairs} items against "
            f"{round(correct['baseline_accuracy'] * pairs)} of {pairs}") in section


def _interval(row: dict) -> str:
    return f"{row['difference']:+.2f} [{row['low']:+.2f}, {row['high']:+.2f}]"


WORDS = "none one two three four five six seven eight nine ten eleven twelve".split()


def _p(p: float) -> str:
    return "1" if p == 1 else f"{p:.2f}"


def test_the_page_quotes_the_committed_accuracy_tests():
    """Each final-accuracy comparison's discordant items, McNemar p, Tango interval and the bounds the prose
    draws from it are summary.json's."""
    summary, section = _summary_and_page("## Three forks of the GSM8K debate")
    parent = summary["identity_vs_parent"]
    assert (f"{WORDS[parent['only_config']]} items right only in the fork and {WORDS[parent['only_baseline']]} only "
            f"in the parent (McNemar p = {_p(parent['p_mcnemar'])}; Tango's 95% score interval of the difference "
            f"{parent['score_low']:+.2f} to {parent['score_high']:+.2f})") in section
    adversary = summary["against_control"]["adversarial-agent1"]
    acc = adversary["accuracy"]
    assert (f"{WORDS[acc['only_config']]} items right only with the adversary and {WORDS[acc['only_baseline']]} only "
            f"without (McNemar p = {_p(acc['p_mcnemar'])}; Tango's 95% score interval of the difference "
            f"{acc['score_low']:+.2f} to {acc['score_high']:+.2f})") in section
    assert (f"moves the others to its answer by at most about {round(max(r['high'] for r in adversary['follow']) * 100)} "
            f"points, and final accuracy by at most about {round(-acc['score_low'] * 100)} points down or "
            f"{round(acc['score_high'] * 100)} up") in section
    acc = summary["against_control"]["correct-agent1"]["accuracy"]
    assert (f"({WORDS[acc['only_config']]} items right only with the stand-in, {WORDS[acc['only_baseline']]} the other "
            f"way; difference {acc['difference']:+.2f}, Tango's 95% score interval {acc['score_low']:+.2f} to "
            f"{acc['score_high']:+.2f}; McNemar p = {_p(acc['p_mcnemar'])})") in section
    assert (f"the stand-in moves final accuracy by at most about {round(acc['score_high'] * 100)} points up or "
            f"{round(-acc['score_low'] * 100)} down") in section


def test_the_page_quotes_the_committed_follow_counts():
    """Who followed, the engine's noise and the copying, as the page words them, are summary.json's."""
    summary, section = _summary_and_page("## Three forks of the GSM8K debate")
    adversary, correct = summary["against_control"]["adversarial-agent1"], summary["against_control"]["correct-agent1"]

    first, then = ({r["round"]: r for r in adversary["follow"]}[k] for k in (2, 3))
    assert first["agents"] == then["agents"] and first["left_out"] == then["left_out"] == 0
    assert (f"agent3's {first['agents']} answers that were not already the pushed one, {first['fork_followed']} "
            f"gave it in round 2 with the adversary and {first['control_followed']} without") in section
    assert f"(difference {_interval(first)})" in section
    assert (f"after reading it, {then['fork_followed']} against {then['control_followed']} "
            f"({_interval(then)})") in section
    gives = {r["round"]: r for r in adversary["agent1"]}
    assert (f"agent1 gave it in {gives[2]['fork_gives']} of its {gives[2]['fork_answers']} round-2 replies and "
            f"{gives[3]['fork_gives']} of {gives[3]['fork_answers']} in round 3") in section
    assert (f"({gives[2]['control_gives']} of {gives[2]['control_answers']} and {gives[3]['control_gives']} of "
            f"{gives[3]['control_answers']}:") in section

    first, then = ({r["round"]: r for r in correct["follow"]}[k] for k in (2, 3))
    before = correct["before"]
    assert (f"{before['not_pushed']} over {first['items']} items were not right "
            f"({before['not_pushed'] - before['missing']} wrong, {before['missing']} missing)"
            in section.replace("one missing", "1 missing"))
    assert (f"of the {first['agents']} that answered in round 2 in both forks (one gave no answer beside the "
            f"stand-in), {first['fork_followed']} gave the correct answer with the stand-in and "
            f"{first['control_followed']} in the control (difference {_interval(first)}); in round 3, "
            f"{then['fork_followed']} of {then['agents']} against {then['control_followed']} ({_interval(then)})"
            ) in section
    assert first["left_out"] == 1 and then["left_out"] == 0  # the one the page names
    split = correct["follow_by_agent1"]
    items, missing = split["not_right"][0]["items"], correct["agent1_missing"]
    assert (f"where agent1 was not right in round 1 ({items} items: wrong on {items - missing}, no answer on "
            f"{missing})") in section
    right = {r["round"]: r for r in split["right"]}[3]
    verdict = "agrees" if right["p_exact"] < 0.05 else "does not confirm it at the 0.05 level"
    pull = {r["round"]: r for r in split["not_right"]}[2]
    later = {r["round"]: r for r in split["not_right"]}[3]
    family = {(r["fork"], r["items"], r["round"]): r for r in summary["follow_family"]}
    assert f"These are two of {WORDS[len(family)]} follow differences on this page" in section
    assert (f"p = {pull['p_exact']:.2f} in round 2 ({pull['only_fork']} agents followed only with the stand-in, "
            f"{pull['only_control']} only in the control) and p = {later['p_exact']:.2f} in round 3 "
            f"({later['only_fork']} and {later['only_control']})") in section
    assert f"where agent1 was right ({right['items']} items)" in section
    assert all(r["p_holm"] >= 0.05 for r in family.values()), "one survives Holm's adjustment: the page says none does"
    assert (f"gives p = {family['correct-agent1', 'agent1 not_right', 2]['p_holm']:.2f} for the round-2 pull where "
            f"agent1 was not right and p = {family['correct-agent1', 'agent1 right', 3]['p_holm']:.2f} for the worked "
            f"reply's lead in round 3: neither survives it at the 0.05 level") in section
    copied = correct["right_only_here"]
    every = [r["item_id"] for r in copied if r["copied"] == r["correct_agents"] > 0]
    some = [r for r in copied if 0 < r["copied"] < r["correct_agents"]]
    assert len(copied) == correct["accuracy"]["only_config"]
    assert (f"on {WORDS[len(every)]} of the {WORDS[len(copied)]} ({', '.join(every[:-1])} and {every[-1]}) every "
            f"correct answer of the last round is read from a line copied from what its agent was shown, and on "
            f"{WORDS[len(some)]} more one of them is") in section
    assert all(r["copied"] == 1 for r in some)  # "one of them"
    assert right["high"] < 0 and (f"the exact test on the same {right['agents']} agents {verdict} "
                                  f"({right['only_control']} followed only in the control, {right['only_fork']} only "
                                  f"with the stand-in: p = {right['p_exact']:.2f}") in section
    for rows in split.values():
        first, then = ({r["round"]: r for r in rows}[k] for k in (2, 3))
        assert (f"{first['fork_followed']} of {first['agents']} followed in round 2 against "
                f"{first['control_followed']} of {first['agents']} ({_interval(first)})") in section
        assert (f"{then['fork_followed']} of {then['agents']} against {then['control_followed']} of "
                f"{then['agents']} in round 3 ({_interval(then)})") in section

    copying = {r["round"]: r for r in correct["copying"]}
    for row in correct["follow"]:  # the followers whose copying is counted are follow_rate's
        assert (copying[row["round"]]["fork_followed"], copying[row["round"]]["control_followed"]) == \
            (row["fork_followed"], row["control_followed"])
    assert (f"{copying[2]['fork_copying']} of the {copying[2]['fork_followed']} round-2 followers with the stand-in "
            f"against {copying[2]['control_copying']} of the {copying[2]['control_followed']} in the control, and "
            f"{copying[3]['fork_copying']} of {copying[3]['fork_followed']} against {copying[3]['control_copying']} "
            f"of {copying[3]['control_followed']} in round 3") in section
    early = correct["first_items"]
    start, whole = early["follow"][0], correct["follow"][0]
    assert (f"The first {early['items']} items had suggested more ({start['fork_followed']} followers against "
            f"{start['control_followed']}, and the final majority right on "
            f"{round(early['accuracy']['accuracy'] * early['items'])} of {early['items']} against "
            f"{round(early['accuracy']['baseline_accuracy'] * early['items'])} of {early['items']}); the next "
            f"{correct['items'] - early['items']} added {whole['fork_followed'] - start['fork_followed']} followers "
            f"against {whole['control_followed'] - start['control_followed']}") in section
    others, own = summary["same_request"]
    assert others["same_request"] == others["pairs"] and own["same_request"] == own["pairs"]
    assert (f"of agent2's and agent3's {others['pairs']} such calls, {others['same_text']} came back with the same "
            f"text and {others['same_answer']} with the same answer; of agent1's {own['pairs']}, {own['same_text']} "
            f"and {own['same_answer']}") in section


def test_the_page_quotes_the_committed_conformity_effect():
    summary, section = _summary_and_page("**Conformity beside the control**")

    at = 0
    for fork, measure in (("adversarial-agent1", "keep"), ("correct-agent1", "keep"),
                          ("adversarial-agent1", "to_majority"), ("correct-agent1", "to_majority")):
        row = next(r for r in summary["against_control"][fork]["conformity"]
                   if (r["to_round"], r["measure"]) == (3, measure))
        at = section.index(f"{row['fork_count']} of {row['fork_of']} against {row['control_count']} of "
                           f"{row['control_of']}", at)  # in this order
        assert f"({_interval(row)})" in section[at:at + 80]
        assert row["low"] <= 0 <= row["high"]  # "neither change measurably moved" them
