"""judged_debate and blind_judge driven end to end by scripted models; assertions on what each role saw."""

import json

import pytest

from debatekit.cli.app import main
from debatekit.datasets import DatasetError, Item
from debatekit.models.scripted import Fault
from debatekit.protocols.judged_debate.items import setup_for
from debatekit.protocols.judged_debate.quotes import check_quotes, normalize, truncate
from debatekit.protocols.shared import extract
from debatekit.records.schemas import RunConfig
from debatekit.registry import ProtocolError, get
from debatekit.runner import run
from tests.protocols.judged_helpers import FACTS, choice_file, pick, roles, yes_no_file


def go(tmp_path, model, data, name="judged_debate", out="run", **params):
    return run(RunConfig(protocol=name, dataset=str(data), model=model, params=params), tmp_path / out,
               progress=False)


def prompts(seen, agent, phase=None):
    return {r.round: r.messages[-1]["content"] for r in seen if r.agent == agent and (phase is None or r.phase == phase)}


# --- sides --------------------------------------------------------------------------------

def test_sides_come_from_the_seed_both_orders_occur_and_a_rerun_repeats_them(tmp_path, model_from):
    data = yes_no_file(tmp_path / "d.jsonl", n=12)
    sides = {}
    for out, seed in (("one", 0), ("again", 0), ("other", 1)):
        model = model_from(roles([]))
        result = run(RunConfig(protocol="judged_debate", dataset=str(data), model=model, seed=seed,
                               params={"rounds": 1}), tmp_path / out, progress=False)
        sides[out] = {d.item_id: d.output["correct_position"] for d in result.debates}
        for d in result.debates:  # debater_a defends the candidate at A
            assert d.output["sides"]["debater_a"] == ("yes" if d.output["candidates"]["A"] == "yes" else "no")
            assert (d.output["sides"]["debater_a"] == d.truth) == (d.output["correct_position"] == "A")
    assert set(sides["one"].values()) == {"A", "B"}
    assert sides["one"] == sides["again"] and sides["one"] != sides["other"]


def test_a_multiple_choice_item_gives_the_right_option_and_a_distractor_drawn_from_the_seed(tmp_path, model_from):
    data = choice_file(tmp_path / "m.jsonl", n=10)
    model = model_from(roles([], verdict=pick("Nile")))
    result = go(tmp_path, model, data, rounds=1)
    distractors = set()
    for d in result.debates:
        texts = set(d.output["candidates"].values())
        assert "Nile" in texts and len(texts) == 2
        distractors |= texts - {"Nile"}
        assert d.final_answer == "C" and d.correct is True  # scored as the item's letter
    assert len(distractors) >= 2 and distractors <= {"Rhine", "Danube", "Volga", "Thames"}


# --- who sees what ------------------------------------------------------------------------

def test_debaters_read_the_evidence_the_judge_never_does_and_sees_quotes_marked(tmp_path, model_from):
    seen = []
    self_certified = lambda req: ("<argument>trust me <v_quote>rivers sing at night</v_quote> "  # noqa: E731
                                  f"<quote>{FACTS[0]}</quote></argument>")
    result = go(tmp_path, model_from(roles(seen, argument=self_certified)), yes_no_file(tmp_path / "d.jsonl"),
                rounds=2)
    (debate,) = result.debates
    debaters = [r for r in seen if r.phase == "argue"]
    judges = [r for r in seen if r.agent == "judge"]
    assert len(debaters) == 4 and len(judges) == 2
    for req in debaters:
        assert all(fact in req.messages[-1]["content"] for fact in FACTS)
    for req in judges:
        text = json.dumps(req.messages)
        assert FACTS[1] not in text and "<evidence>" not in text
        shown = req.messages[-1]["content"]
        assert shown.count(f"<v_quote>{FACTS[0]}</v_quote>") == 4  # two rounds, two debaters
        assert shown.count("<u_quote>rivers sing at night</u_quote>") == 4  # its own v_quote tag was re-checked
        assert "<v_quote>rivers sing at night" not in shown
    assert debate.rounds[0].extra["verified"] == {"debater_a": [FACTS[0]], "debater_b": [FACTS[0]]}
    assert debate.rounds[0].extra["unverified"]["debater_a"] == ["rivers sing at night"]
    assert debate.output["quotes"]["debater_b"] == {"verified": 2, "unverified": 2}


def test_simultaneous_turns_show_only_earlier_rounds(tmp_path, model_from):
    seen = []
    go(tmp_path, model_from(roles(seen)), yes_no_file(tmp_path / "d.jsonl"), rounds=2)
    a, b = prompts(seen, "debater_a"), prompts(seen, "debater_b")
    assert "arg-debater_b" not in a[1] and "arg-debater_a" not in b[1]
    assert "arg-debater_b-r1" in a[2] and "arg-debater_a-r1" in b[2]
    assert "arg-debater_b-r2" not in a[2] and "arg-debater_a-r2" not in b[2]
    # each debater reads its own argument first in a round; the quotes it sees are marked
    assert a[2].index("Debater A:") < a[2].index("Debater B:") and b[2].index("Debater B:") < b[2].index("Debater A:")
    assert "<u_quote>the Nile is purple</u_quote>" in a[2]


def test_sequential_turns_show_the_first_speakers_argument_of_the_same_round_from_round_two(tmp_path, model_from):
    seen = []
    result = go(tmp_path, model_from(roles(seen)), yes_no_file(tmp_path / "d.jsonl"), rounds=3, turns="sequential")
    a, b = prompts(seen, "debater_a"), prompts(seen, "debater_b")
    assert "arg-debater_a-r1" not in b[1]  # round 1 stays simultaneous, as in the official code
    assert "arg-debater_a-r2" in b[2] and "arg-debater_a-r3" in b[3]
    assert "arg-debater_b-r2" not in a[2] and "arg-debater_b-r2" in a[3]
    order = [(r.round, r.agent) for r in seen if r.phase == "argue"]
    assert order[2:] == [(2, "debater_a"), (2, "debater_b"), (3, "debater_a"), (3, "debater_b")]
    (debate,) = result.debates
    assert [j["order"] for j in debate.output["judgements"]] == ["as_run"]  # one reading by default


def test_the_swapped_reading_exchanges_letters_names_and_order(tmp_path, model_from):
    seen = []
    go(tmp_path, model_from(roles(seen)), yes_no_file(tmp_path / "d.jsonl"), rounds=1)
    as_run, swapped = (next(r.messages[-1]["content"] for r in seen if r.phase == p) for p in ("judge", "judge_swapped"))
    letters = lambda text: [line[3:] for line in text.splitlines() if line[:3] in ("A: ", "B: ")]  # noqa: E731
    assert sorted(letters(as_run)) == ["no", "yes"] and letters(swapped) == letters(as_run)[::-1]
    # Debater A speaks first in both readings; in the swapped one it is the as-run debater_b
    assert as_run.index('Debater A: """arg-debater_a') < as_run.index('Debater B: """arg-debater_b')
    assert swapped.index('Debater A: """arg-debater_b') < swapped.index('Debater B: """arg-debater_a')


def test_judge_model_answers_only_the_judge_calls(tmp_path, model_from):
    seen_debaters, seen_judge = [], []
    debaters, judge = model_from(roles(seen_debaters)), model_from(roles(seen_judge))
    go(tmp_path, debaters, yes_no_file(tmp_path / "d.jsonl"), rounds=1, judge_model=judge)
    assert {r.agent for r in seen_debaters} == {"debater_a", "debater_b"}
    assert {r.agent for r in seen_judge} == {"judge"} and len(seen_judge) == 2


# --- the verdict --------------------------------------------------------------------------

def test_the_judges_probability_is_recorded_and_decides_the_final_answer(tmp_path, model_from):
    data = yes_no_file(tmp_path / "d.jsonl", n=2)  # q0: yes, q1: no
    result = go(tmp_path, model_from(roles([], verdict=pick("yes", 0.9))), data, rounds=1)
    by_item = {d.item_id: d for d in result.debates}
    right, wrong = by_item["q0"], by_item["q1"]
    assert right.final_answer == "yes" and right.correct is True and right.output["p_correct"] == 0.9
    assert wrong.final_answer == "yes" and wrong.correct is False and wrong.output["p_correct"] == pytest.approx(0.1)
    readings = right.output["judgements"]
    assert [j["order"] for j in readings] == ["as_run", "swapped"] and {j["letter"] for j in readings} == {"A", "B"}
    assert all(j["answer"] == "yes" and j["probability"] == 0.9 and j["correct"] for j in readings)
    assert right.output["order_accuracy"] == 1.0


def test_readings_that_disagree_are_settled_by_the_mean_probability_and_a_tie_by_the_as_run_reading(tmp_path,
                                                                                                  model_from):
    data = yes_no_file(tmp_path / "d.jsonl")  # truth yes

    def split(req, shown):  # as run: right at 0.6; swapped: wrong at 0.9
        return pick("yes", 0.6)(req, shown) if req.phase == "judge" else pick("no", 0.9)(req, shown)

    (debate,) = go(tmp_path, model_from(roles([], verdict=split)), data, rounds=1).debates
    assert debate.output["p_correct"] == pytest.approx(0.35) and debate.final_answer == "no"
    assert debate.output["order_accuracy"] == 0.5
    # a judge that always says A at the same probability: a tie, the as-run reading decides
    (tied,) = go(tmp_path, model_from(roles([], verdict=lambda req, shown: ("A", 0.7))), data, "judged_debate",
                 "tie", rounds=1).debates
    as_run = tied.output["judgements"][0]
    assert tied.output["p_correct"] == pytest.approx(0.5) and tied.final_answer == as_run["answer"]


def test_percent_probabilities_are_read_and_a_pick_without_a_usable_one_counts_as_undecided(tmp_path, model_from):
    """The embedded model writes `Probability: 0` beside a clear pick, or no probability at all: the
    pick stands at 0.5 (no confidence stated), what it wrote is kept, and nothing is a parse failure."""
    stated = {"judge": "Probability: 85%", "judge_swapped": "Probability: 0"}

    def judge(req, shown):
        letter = next(k for k, v in shown.items() if v == "yes")
        return f"Answer: {letter}\n{stated[req.phase]}"

    (debate,) = go(tmp_path, model_from(roles([], verdict=judge)), yes_no_file(tmp_path / "d.jsonl"), rounds=1).debates
    readings = debate.output["judgements"]
    assert [(j["probability"], j["stated_probability"]) for j in readings] == [(0.85, 0.85), (0.5, 0.0)]
    assert debate.usage.parse_failures == 0 and debate.status == "ok" and debate.correct
    assert debate.output["p_correct"] == pytest.approx((0.85 + 0.5) / 2)

    stated["judge"] = "I am fairly sure."  # no probability line at all
    (debate,) = go(tmp_path / "again", model_from(roles([], verdict=judge)), yes_no_file(tmp_path / "d.jsonl"),
                   rounds=1).debates
    assert [(j["probability"], j["stated_probability"]) for j in debate.output["judgements"]] == [(0.5, None),
                                                                                                  (0.5, 0.0)]
    assert debate.usage.parse_failures == 0 and debate.correct  # a tie: the as-run reading's pick


def test_a_verdict_needs_an_answer_line_not_an_option_word_in_prose(tmp_path, model_from):
    replies = iter(["I have no idea.\nProbability: 0.9", "Answer: B\nProbability: 0.9"])
    model = model_from(roles([], verdict=lambda req, shown: next(replies)))
    (debate,) = go(tmp_path, model, yes_no_file(tmp_path / "d.jsonl"), rounds=1, both_orders=False).debates
    assert debate.usage.parse_failures == 1  # "no idea" was not read as the option "no"; the repair was
    assert [j["letter"] for j in debate.output["judgements"]] == ["B"]


# --- failures -----------------------------------------------------------------------------

def test_a_judge_without_a_readable_verdict_fails_the_debate_instead_of_scoring_it_wrong(tmp_path, model_from):
    model = model_from(roles([], verdict=lambda req, shown: "I cannot decide."))
    (debate,) = go(tmp_path, model, yes_no_file(tmp_path / "d.jsonl"), rounds=1).debates
    assert debate.status == "failed" and debate.correct is None and "judge gave no readable verdict" in debate.error


def test_a_judge_whose_calls_fail_leaves_the_debate_unscored(tmp_path, model_from):
    model = model_from(roles([], verdict=lambda req, shown: Fault("bad_request", "judge down")))
    (debate,) = go(tmp_path, model, yes_no_file(tmp_path / "d.jsonl"), rounds=1).debates
    assert debate.status == "error" and debate.correct is None and debate.final_answer is None


def test_one_failed_reading_leaves_the_other_to_decide(tmp_path, model_from):
    def judge(req, shown):
        return Fault("bad_request", "judge down") if req.phase == "judge_swapped" else pick("yes")(req, shown)

    (debate,) = go(tmp_path, model_from(roles([], verdict=judge)), yes_no_file(tmp_path / "d.jsonl"), rounds=1).debates
    assert debate.status == "degraded" and debate.correct is True
    assert [j["order"] for j in debate.output["judgements"]] == ["as_run"]


def test_a_debater_whose_call_fails_is_missing_from_that_round_and_the_judge_still_decides(tmp_path, model_from):
    seen = []

    def argument(req):
        if (req.agent, req.round) == ("debater_b", 2):
            return Fault("bad_request", "debater down")
        return f"<argument>arg-{req.agent}-r{req.round}</argument>"

    (debate,) = go(tmp_path, model_from(roles(seen, argument=argument)), yes_no_file(tmp_path / "d.jsonl"),
                   rounds=2).debates
    assert debate.status == "degraded" and debate.output["missing"] == ["round 2 debater_b"]
    assert debate.rounds[1].answers["debater_b"] is None and debate.rounds[1].answers["debater_a"] is not None
    judge = next(r.messages[-1]["content"] for r in seen if r.phase == "judge")
    assert "arg-debater_b-r1" in judge and "arg-debater_a-r2" in judge


def test_a_reply_without_argument_tags_is_repaired_once(tmp_path, model_from):
    tries = []

    def argument(req):
        tries.append(req.agent)
        return "no tags at all" if tries.count(req.agent) == 1 else "<argument>now tagged</argument>"

    (debate,) = go(tmp_path, model_from(roles([], argument=argument)), yes_no_file(tmp_path / "d.jsonl"),
                   rounds=1).debates
    assert debate.usage.parse_failures == 2 and debate.output["missing"] == []


# --- parameters and rows ------------------------------------------------------------------

@pytest.mark.parametrize("params, message", [
    ({"turns": "sequential", "both_orders": True}, "both_orders needs simultaneous turns"),
    ({"rounds": 0}, "parameter 'rounds'"),
    ({"turns": "round_robin"}, "parameter 'turns'"),
    ({"answer": "integer"}, "parameter 'answer'"),
])
def test_bad_parameters_are_one_line_errors(params, message):
    with pytest.raises(ProtocolError, match=message) as caught:
        get("judged_debate").build(params)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("row, message", [
    ({"id": "e1", "question": "Q?", "answer": "yes"}, "item 'e1' has no evidence"),
    ({"id": "n1", "question": "Q?", "answer": 12, "evidence": ["x"]}, "item 'n1' has no second candidate"),
    ({"id": "u1", "question": "Q?", "evidence": ["x"]}, "item 'u1' has no answer"),
    ({"id": "c1", "question": "Q?", "answer": "F", "choices": ["a", "b"], "evidence": ["x"]}, "item 'c1' needs"),
])
def test_a_row_without_what_the_protocol_needs_is_refused_naming_the_item(tmp_path, row, message):
    data = tmp_path / "bad.jsonl"
    data.write_text(json.dumps(row) + "\n")
    for name in ("judged_debate", "consultancy", "blind_judge"):
        with pytest.raises(DatasetError, match=message) as caught:
            go(tmp_path, "scripted/schema", data, name, out=name)
        assert "\n" not in str(caught.value)


def test_legal_conflicts_passages_count_as_evidence_but_its_items_have_no_answer_to_argue(tmp_path):
    with pytest.raises(DatasetError, match="item 'lc-001' has no answer"):  # its passages did count as evidence
        run(RunConfig(protocol="judged_debate", dataset="legal_conflicts", model="scripted/schema"), tmp_path / "r",
            progress=False)


def test_an_item_handed_over_directly_is_checked_too():
    with pytest.raises(ProtocolError, match="consultancy: item 'x' has no evidence"):
        setup_for(Item(id="x", question="Q?", answer="yes"), 0, protocol="consultancy")
    with pytest.raises(ProtocolError, match="item 'y' has no choices, so answer=choice cannot apply"):
        setup_for(Item(id="y", question="Q?", answer="yes", evidence=["e"]), 0, "choice")


def test_a_truth_written_as_false_argues_no_against_yes():
    setup = setup_for(Item(id="f", question="Q?", answer="false", evidence=["e"]), 0)
    assert sorted(setup.values) == ["no", "yes"] and setup.values[setup.correct] == "no"


# --- pieces -------------------------------------------------------------------------------

def test_quote_check_ignores_case_punctuation_and_curly_quotes_but_not_words():
    evidence = "Albany, GA has around 75,000 people.\nIt\u2019s the 8th city."
    checked = check_quotes("<quote>albany GA has around 75000 people</quote> <quote>It's the 8th</quote> "
                           "<quote>Albany has 90,000 people</quote>", evidence)
    assert checked.verified == ["albany GA has around 75000 people", "It's the 8th"]
    assert checked.unverified == ["Albany has 90,000 people"]
    assert normalize("  \u201cHi,\u201d   THERE!") == "hi there"


def test_truncation_cuts_words_closes_an_open_quote_and_marks_the_cut():
    assert truncate("one two three", 3) == "one two three"
    assert truncate("a b <quote>c d e</quote> f", 4) == "a b <quote>c d</quote>... <TRUNCATED>"


def test_probability_lines_are_read_as_fractions_or_percents():
    assert extract.probability("Answer: A\nProbability: 0.75") == 0.75
    assert extract.probability("**Confidence:** 80%") == 0.8
    assert extract.probability("Probability: 70") == 0.7
    assert extract.probability("Probability: 250") is None and extract.probability("Answer: A") is None


# --- the judge alone ----------------------------------------------------------------------

def test_the_blind_judge_sees_the_same_candidates_and_positions_without_debate_or_evidence(tmp_path, model_from):
    data = yes_no_file(tmp_path / "d.jsonl", n=6)
    seen = []
    blind = go(tmp_path, model_from(roles(seen, verdict=pick("yes"))), data, "blind_judge", out="blind")
    debate = go(tmp_path, model_from(roles([])), data, rounds=1)
    positions = lambda r: {d.item_id: d.output["candidates"] for d in r.debates}  # noqa: E731
    assert positions(blind) == positions(debate)
    assert {r.phase for r in seen} == {"judge", "judge_swapped"} and len(seen) == 12
    for req in seen:
        assert FACTS[0] not in req.prompt and "Debater" not in req.prompt
    assert [d.correct for d in blind.debates] == [True, False] * 3


def test_the_cli_pairs_the_judged_debate_against_the_judge_alone(tmp_path, model_from, capsys):
    data = yes_no_file(tmp_path / "d.jsonl", n=4)
    judge = model_from(roles([], verdict=pick("no")))
    assert main(["run", "blind_judge", "judged_debate", "--dataset", str(data), "--model",
                 model_from(roles([])), "--set", f"judge_model={judge}", "--rounds", "1", "--quiet",
                 "--out", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert "paired against blind_judge" in out and "judge accuracy over its readings" in out
