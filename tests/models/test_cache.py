"""What a call event gives back to a response cache (`replies_in`, `ResponseCache.restore`)."""

from debatekit.models.cache import ResponseCache, replies_in, reply_record

REPLY = {"text": "Answer: 7", "finish_reason": "stop", "prompt_tokens": 40, "completion_tokens": 3}


def event(text: str, *records: dict, repairs: tuple[str, ...] = ()) -> dict:
    return {"text": text, "repairs": [{"text": t, "error": "e", "repair_prompt": "p"} for t in repairs],
            "replies": list(records)}


def test_a_reply_record_keeps_all_but_the_text_and_gives_the_reply_back_whole():
    record = reply_record("k1", REPLY)
    assert record == {"key": "k1", "chars": 9, "finish_reason": "stop", "prompt_tokens": 40, "completion_tokens": 3}
    assert replies_in(event("Answer: 7", record)) == [("k1", REPLY)]


def test_repaired_replies_pair_with_their_texts_in_order():
    first, last = {**REPLY, "text": "garbled"}, REPLY
    pairs = replies_in(event("Answer: 7", reply_record("a", first), reply_record("b", last), repairs=("garbled",)))
    assert pairs == [("a", first), ("b", last)]


def test_a_text_the_event_holds_cut_short_or_a_record_that_is_no_reply_is_left_out():
    record = reply_record("k1", {**REPLY, "text": "x" * 200})
    assert replies_in(event("x" * 100 + " [cut]", record)) == []  # the event's text was capped
    assert replies_in(event("Answer: 7", {**reply_record("k2", REPLY), "prompt_tokens": "many"})) == []
    assert replies_in(event("Answer: 7", "not a record")) == []
    assert replies_in({"text": "Answer: 7"}) == []  # recorded before replies were kept
    # the last fetch failed after a repair: only the repaired reply has a record and a text
    assert replies_in(event("garbled", reply_record("a", {**REPLY, "text": "garbled"}), repairs=("garbled",))) == [
        ("a", {**REPLY, "text": "garbled"})]


def test_restore_puts_back_only_what_the_cache_lacks(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put("k1", {**REPLY, "text": "kept"})
    assert cache.restore([("k1", REPLY), ("k2", REPLY)]) == 1
    assert cache.get("k1")["text"] == "kept" and cache.get("k2") == REPLY
