"""`debatekit study GRID --status`: each point's items against the grid's limit, its last stretch's
rate and the hours left, from run folders whose calls' times are set by hand."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from debatekit.cli import app as cli
from debatekit.models import scripted
from debatekit.records.schemas import RunConfig
from debatekit.runner import run
from debatekit.sweep import expand_grid, load_grid, progress


def rows_of(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def call(ts, latency, tokens, cache_hit=False):
    return {"ts": ts, "latency_s": latency, "completion_tokens": tokens, "cache_hit": cache_hit}


def test_the_rate_is_the_last_stretchs_tokens_over_its_span():
    events = [call(1000, 100, 300), call(1100, 150, 200), call(1150, 0, 999, cache_hit=True)]
    # the first call started at 900, the last finished at 1100: 500 tokens in 200 s
    assert progress.session_rate(events) == pytest.approx(2.5)


def test_a_pause_longer_than_the_gap_ends_the_stretch():
    events = [call(0, 10, 50), call(1000, 100, 300), call(1100, 150, 200)]  # 1000 s without a call: stopped
    assert progress.session_rate(events) == pytest.approx(2.5)
    assert progress.session_rate(events, gap_s=2000) == pytest.approx(550 / 1110)


def test_the_stretch_starts_no_earlier_than_the_runs_last_start():
    events = [call(1000, 100, 300), call(1100, 150, 200)]
    assert progress.session_rate(events, since=920) == pytest.approx(500 / 180)
    assert progress.session_rate(events, since=1050) == pytest.approx(200 / 50)  # the earlier call is not this session's


def test_no_call_made_is_no_rate():
    assert math.isnan(progress.session_rate([]))
    assert math.isnan(progress.session_rate([call(10, 1, 5, cache_hit=True)]))


@pytest.fixture
def study(tmp_path):
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is {i}?", "answer": i}) + "\n"
                            for i in range(1, 5)))
    folder = tmp_path / "study"
    folder.mkdir()
    grid = folder / "grid.yaml"
    grid.write_text(yaml.safe_dump({"parameters": {"dataset": str(data), "model": "scripted/schema", "limit": 4},
                                    "points": [{"protocol": "single"}, {"protocol": "self_consistency", "samples": 3}]}))
    first = expand_grid(load_grid(grid))[0]
    # the first point ran 2 of its 4 items (a first-2 run copied in), the second never started
    model = scripted.register("progress-model", fn=lambda req: {"reasoning": "r", "answer": 1})  # right on q1 only
    run(RunConfig(protocol="single", dataset=str(data), model=model, limit=2,
                  params={"answer_format": "json"}), folder / first.id, progress=False)
    events = folder / first.id / "events.jsonl"
    rows = rows_of(events)
    for n, row in enumerate(rows):  # two calls, 100 s apart, each 100 s long, made long after the run began
        row.update(ts=4_000_000_000 + 100 * (n + 1), latency_s=100.0, completion_tokens=50, cache_hit=False)
    write_rows(events, rows)
    return grid


def test_progress_counts_items_against_the_grids_limit_and_prices_the_rest(study):
    table = progress.progress(study).set_index("protocol")
    done = table.loc["single"]
    assert (done["done"], done["limit"], done["state"]) == (2, 4, "complete to 2")
    assert done["tokens_per_s"] == pytest.approx(100 / 200)  # 2 x 50 tokens from the first start to the last end
    assert done["tokens_per_item"] > 0
    assert done["hours_left"] == pytest.approx(2 * done["tokens_per_item"] / 0.5 / 3600)
    assert done["accuracy"] == pytest.approx(0.5)  # q1 right, q2 wrong
    waiting = table.loc["self_consistency"]
    assert (waiting["done"], waiting["state"]) == (0, "not started") and math.isnan(waiting["hours_left"])


def test_status_prints_the_table_and_runs_nothing(study, capsys):
    before = sorted(p.name for p in study.parent.iterdir())
    assert cli.main(["study", str(study), "--status"]) == 0
    out = capsys.readouterr().out
    assert "2/4" in out and "0/4" in out and "not started" in out and "complete to 2" in out
    assert "1 point(s) with no estimate yet" in out
    assert sorted(p.name for p in study.parent.iterdir()) == before  # no sweep ran


def test_debates_with_calls_and_no_record_are_counted_unfinished(study):
    folder = study.parent / expand_grid(load_grid(study))[0].id
    events = folder / "events.jsonl"
    rows = rows_of(events)
    # two debates cut off (or still running): their calls are traced, their records not written
    cut = [{**rows[0], "debate_id": "cutoff1", "item_id": "q3", "completion_tokens": 20},
           {**rows[0], "debate_id": "cutoff2", "item_id": "q4", "completion_tokens": 10},
           {**rows[0], "debate_id": "cutoff2", "item_id": "q4", "completion_tokens": 20}]
    # and a superseded record (an error re-run later) is a finished debate, not an unfinished one
    debates = folder / "debates.jsonl"
    records = rows_of(debates)
    for record in records:  # each finished debate took 50 completion tokens
        record["usage"]["completion_tokens"] = 50
    old = {**records[0], "debate_id": "superseded", "status": "error",
           "usage": {**records[0]["usage"], "completion_tokens": 5000}}
    write_rows(debates, [old, *records])
    write_rows(events, [*rows, *cut, {**rows[0], "debate_id": "superseded"}])
    row = progress.progress(study).set_index("protocol").loc["single"]
    assert row["state"] == "complete to 2, 2 unfinished"
    # the two finished debates took 50 tokens each; the unfinished ones, at 20 and 30, will too:
    # 30 + 20 more, and no item is left unstarted
    assert row["tokens_per_item"] == pytest.approx(50)
    assert row["hours_left"] == pytest.approx(50 / row["tokens_per_s"] / 3600)


@pytest.mark.parametrize("finished, spent, unstarted, per_debate, left", [
    # Kaplan-Meier by hand: 100 ends (3 at risk) S = 2/3; 200 is censored; 300 ends (1 at risk) S = 0.
    # Mean 100 + 200 * 2/3; the one at 200 can only end at 300: 100 more
    ([100, 300], [200], 1, 100 + 200 * 2 / 3, 100 + 200 * 2 / 3 + 100),
    ([100, 300], [], 2, 200, 400),  # nothing unfinished: the plain mean
    # 50 censored; 100 ends (2 at risk) S = 1/2; 500 censored, past every finished debate: priced at nothing
    ([100], [50, 500], 0, 100 + 400 / 2, 50 + 400 / 2),
])
def test_unfinished_debates_count_as_taking_at_least_what_they_spent(finished, spent, unstarted, per_debate, left):
    assert progress.tokens_left(finished, spent, unstarted) == (pytest.approx(per_debate), pytest.approx(left))


def test_the_finished_alone_underprice_a_point_whose_long_debates_are_still_running():
    cheap_first = [100] * 5
    still_going = [400] * 5  # half the point, each already past every finished debate's total but one
    per_debate, _ = progress.tokens_left([*cheap_first, 600], still_going, 0)
    assert per_debate > sum([*cheap_first, 600]) / 6 + 100
    assert all(math.isnan(x) for x in progress.tokens_left([], [50], 3))  # nothing finished: no estimate


def test_with_seeds_the_debates_still_to_run_are_counted_not_the_items(tmp_path):
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is {i}?", "answer": i}) + "\n"
                            for i in range(1, 4)))
    grid = tmp_path / "grid.yaml"
    grid.write_text(yaml.safe_dump({"parameters": {"dataset": str(data), "model": "scripted/schema", "limit": 3,
                                                   "seeds": 2}, "points": [{"protocol": "single"}]}))
    (point,) = expand_grid(load_grid(grid))
    folder = tmp_path / point.id
    run(RunConfig(protocol="single", dataset=str(data), model="scripted/schema", limit=2, seeds=2), folder,
        progress=False)
    debates = folder / "debates.jsonl"
    records = rows_of(debates)
    assert len(records) == 4
    for record in records:
        record["usage"]["completion_tokens"] = 40
    # q2's second seed never finished (cut off with 10 tokens spent): its record is dropped
    cut = next(r for r in records if r["item_id"] == "q2" and r["seed"] == 1)
    write_rows(debates, [r for r in records if r is not cut])
    events = folder / "events.jsonl"
    rows = rows_of(events)
    for n, row in enumerate(rows):
        row.update(ts=4_000_000_000 + 100 * (n + 1), latency_s=100.0, cache_hit=False,
                   completion_tokens=10 if row["debate_id"] == cut["debate_id"] else 40)
    write_rows(events, rows)
    row = progress.progress(grid).iloc[0]
    assert row["done"] == 2 and row["state"].endswith("1 unfinished")
    # 3 items x 2 seeds: 3 finished, 1 unfinished (30 more), q3's two not started (40 each)
    assert row["tokens_per_item"] == pytest.approx(80)
    assert row["hours_left"] == pytest.approx((30 + 2 * 40) / row["tokens_per_s"] / 3600)
