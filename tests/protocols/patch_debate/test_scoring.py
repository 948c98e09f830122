"""Tuple P/R/F1, sentence accuracy, aggregation per run and stage."""

import pytest

from debatekit.protocols.patch_debate.scoring import aggregate, stage_rows, stage_scores, tuple_scores

GOLD = [{"term": "pasta", "polarity": "positive"}, {"term": "service", "polarity": "negative"}]


@pytest.mark.parametrize("pred, tp, fp, fn, f1", [
    ([{"term": "The pasta", "polarity": "positive"}, {"term": "Service", "polarity": "negative"}], 2, 0, 0, 1.0),
    ([{"term": "pasta", "polarity": "negative"}, {"term": "service", "polarity": "negative"}], 1, 1, 1, 0.5),
    ([{"term": "pasta", "polarity": "positive"}, {"term": "pasta", "polarity": "positive"}], 1, 1, 1, 0.5),
    ([], 0, 0, 2, 0.0),
])
def test_tuple_scores(pred, tp, fp, fn, f1):
    s = tuple_scores(pred, GOLD)
    assert (s["tp"], s["fp"], s["fn"], s["f1"]) == (tp, fp, fn, f1)


def test_a_korean_term_copied_with_its_particle_still_matches():
    gold = [{"term": "서비스", "polarity": "negative"}, {"term": "맛", "polarity": "positive"}]
    pred = [{"term": "서비스가", "polarity": "negative"}, {"term": "맛이", "polarity": "positive"}]
    assert tuple_scores(pred, gold)["f1"] == 1.0
    assert tuple_scores([{"term": "서비스가", "polarity": "positive"}], gold)["tp"] == 0  # polarity still counts
    assert tuple_scores([{"term": "가", "polarity": "negative"}], [{"term": "가", "polarity": "negative"}])["tp"] == 1


def test_nothing_to_find_and_nothing_found_is_perfect():
    assert tuple_scores([], [])["f1"] == 1.0


def test_aggregate_is_micro_over_items_in_stage_order():
    def debate(item, lang, final_tp):
        return {"run_id": "r", "item_id": item, "output": {"lang": lang, "metrics": {
            "final": {**stage_scores(GOLD[:final_tp], "mixed", GOLD, "mixed")},
            "stage1": {**stage_scores([], "positive", GOLD, "mixed")},
            "debate": {**stage_scores(GOLD[:1], "mixed", GOLD, "mixed")}}}}

    rows = stage_rows([debate("a", "en", 2), debate("b", "ko", 1), {"run_id": "r", "item_id": "c", "output": {}}])
    table = aggregate(rows)
    assert list(table.stage) == ["stage1", "debate", "final"]
    final = table.set_index("stage").loc["final"]
    assert (final["tp"], final["fn"], final["precision"], final["recall"]) == (3, 1, 1.0, 0.75)
    assert final["f1"] == pytest.approx(2 * 0.75 / 1.75, abs=1e-6) and final["sentence_accuracy"] == 1.0
    assert table.set_index("stage").loc["stage1", "sentence_accuracy"] == 0.0
    by_lang = aggregate(rows, by=["lang", "stage"])
    assert set(by_lang.lang) == {"en", "ko"} and len(by_lang) == 6
