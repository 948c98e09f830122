"""The model work in call events: how many calls, completion tokens, and seconds the model was busy."""

from __future__ import annotations


def busy_seconds(spans) -> float:
    """Seconds covered by at least one of the (start, end) spans: overlapping spans count once."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def work_of(dropped: list[dict], kept: list[dict]) -> dict:
    """The model work of the `dropped` call events, cache hits left out: `calls` (attempts and
    repairs included), completion `tokens`, and `busy_s`, the seconds their calls were in flight
    that no `kept` call's were. A resume records it for the events of the debates a stop cut off
    (`run.json` `resumes`, `cut_off_work`), which it drops so that each call is counted once in
    the tables; `compute` adds it back."""
    def spans(events):
        return [(e["ts"] - (e.get("latency_s") or 0.0), e["ts"]) for e in events
                if not e.get("cache_hit") and isinstance(e.get("ts"), (int, float))]

    made = [e for e in dropped if not e.get("cache_hit")]
    both, alone = busy_seconds(spans(dropped) + spans(kept)), busy_seconds(spans(kept))
    return {"calls": sum(int(e.get("calls") or 0) for e in made),
            "tokens": sum(int(e.get("completion_tokens") or 0) for e in made), "busy_s": round(both - alone, 3)}
