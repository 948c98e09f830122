"""What a test on the embedded local model can promise about one debate.

The embedded model's batched decoding is not reproducible from run to run, and a 1.5B model does
not always keep to the answer format (CI once saw a judge reply "Sorry, but I can't assist with
that."). So these tests do not ask the model to behave; they ask the toolkit to: the debate
completes, every call is in the trace, and the record's counts and score say exactly what the
trace says (a reply that could not be parsed is counted, never silently dropped or invented).
"""

import json

from debatekit.records.schemas import ANSWERED

LETTERS = tuple("ABCDE")  # CommonsenseQA's choices


def events_of(result) -> list[dict]:
    return [json.loads(line) for line in (result.path / "events.jsonl").read_text().splitlines()]


def accounted(result, valid) -> tuple:
    """The one debate of `result` and its call events, after checking the accounting; `valid(answer)`
    says whether a final answer is of the dataset's kind. A debate may end unanswered only because of replies that
    could not be parsed, on record: with no final answer (scored wrong: the model answered, just not
    readably) or, where the protocol says an unreadable verdict leaves nothing to score (the judged
    protocols' judge), failed by a ProtocolError and not scored."""
    (debate,) = result.debates
    events = events_of(result)
    texts = [e["text"] for e in events]
    u = debate.usage
    assert u.calls == len(events) and u.errors == sum(e["error"] is not None for e in events), texts
    assert u.parse_failures == sum(e["parse_failures"] for e in events), texts
    assert all(e["output"] is None for e in events if e["error"] is not None)
    if debate.status not in ANSWERED:
        assert debate.status == "failed" and debate.error.startswith("ProtocolError"), (debate.error, texts)
        assert u.parse_failures > 0 and debate.correct is None and debate.score is None, texts
    elif debate.final_answer is None:
        assert u.parse_failures > 0 and debate.correct is False, texts
    else:
        assert valid(debate.final_answer) and isinstance(debate.correct, bool), (debate.final_answer, texts)
    return debate, events
