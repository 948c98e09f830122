"""How far a long sweep has got, and how long the rest will take at the rate it last ran.

A study on a local model runs for many sessions; each one should start by knowing what is left.
`progress(grid, out)` gives one row per point of the grid:

    point           items    accuracy           tok/item  tok/s  hours left  state
    single          100/100  0.60 [0.50, 0.69]  309       21.3   0.0         complete
    society_of_mind 37/100   0.51 [0.35, 0.68]  3,110     14.6   3.7         interrupted

`items` counts finished items against the grid's limit; `tok/item` is the completion tokens an
item takes (its debates', one a seed: `tokens_left`); `tok/s` the completion tokens of the calls of the run's latest
stretch (`session_rate`: back from its last call to the first pause of over 15 minutes, cache
hits left out) over that stretch's span; `hours left` the tokens still to generate at that rate.
A point not started, or one whose last session made no call, has no estimate (NaN).
`state` is the run's status; `N unfinished` after it counts the debates that made calls and have no
record yet: in flight while a run goes on (what a drain waits for), cut off if it was killed (a
resume runs them again, their answered calls served from the response cache, which the resume
fills from their events where it lacks them).

The first debates to finish are the cheap ones (agreement in round 1, short answers), so the mean
of the finished debates alone is low early in a point: on the study's reconcile point at 16 of 100
it was 1,134 tokens, where counting its 29 unfinished debates as taking at least what they had
spent gave 1,983. `tokens_left` therefore treats an unfinished debate's tokens so far as a
right-censored observation (Kaplan-Meier, `scipy.stats.ecdf`), and prices each unfinished debate
at what a debate that has come that far takes beyond it. It is still a low estimate early on:
it ends at the largest total seen, so a debate already past every finished one is priced at
nothing more.
`debatekit study GRID --status` prints it without running anything.
"""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from debatekit.analysis.paired import aligned
from debatekit.analysis.tables import summarize
from debatekit.records.schemas import RunSummary
from debatekit.records.trace import RunFolder
from debatekit.sweep.grid import expand_grid, load_grid

GAP_S = 900.0
"""A pause between two finished calls longer than this ends a stretch of a run (it was stopped)."""

COLUMNS = ["point", "protocol", "done", "limit", "accuracy", "low", "high", "tokens_per_item", "tokens_per_s",
           "hours_left", "state"]


def progress(grid: Path | str, out: Path | str | None = None) -> pd.DataFrame:
    """One row per point of `grid` (a grid YAML) in the sweep folder `out` (default: the grid's folder)."""
    grid = Path(grid)
    out = Path(out) if out is not None else grid.parent
    rows = [_point_row(point, out / point.id) for point in expand_grid(load_grid(grid))]
    return pd.DataFrame(rows, columns=COLUMNS)


def _point_row(point, folder: Path) -> dict:
    row = {"point": point.id, "protocol": point.parameters.get("protocol"), "limit": point.parameters.get("limit"),
           "done": 0, "accuracy": math.nan, "low": math.nan, "high": math.nan, "tokens_per_item": math.nan,
           "tokens_per_s": math.nan, "hours_left": math.nan, "state": "not started"}
    if not (folder / "run.json").exists():
        return row
    run = RunFolder(folder)
    record = run.read_run()
    debates = run.debates()
    summary = RunSummary(**summarize(debates))  # as the run's own table counts: an unreadable answer is wrong
    row["done"], row["state"] = summary.items, record.status
    if summary.accuracy is not None:
        row["accuracy"], (row["low"], row["high"]) = summary.accuracy, summary.accuracy_ci
    events = run.events()
    row["tokens_per_s"] = session_rate(events, last_start(record))
    recorded = run.recorded_debate_ids()
    spent: dict[str, float] = {}
    for e in events:
        if e.get("debate_id") is not None and e["debate_id"] not in recorded:
            spent[e["debate_id"]] = spent.get(e["debate_id"], 0) + (e.get("completion_tokens") or 0)
    per_item = record.config.seeds  # debates an item takes
    # debates still to finish: an item with some seeds done counts only those it lacks
    left = max(0, row["limit"] * per_item - len(debates)) if row["limit"] is not None else math.nan
    unstarted = max(0, left - len(spent)) if not math.isnan(left) else math.nan
    row["tokens_per_item"], tokens = tokens_left([d.usage.completion_tokens for d in debates],
                                                 list(spent.values()), unstarted)
    row["tokens_per_item"] *= per_item
    if left == 0 and not spent:
        row["state"], row["hours_left"] = "complete", 0.0
        return row
    if record.status == "complete":  # complete at a smaller limit (a first-10 run copied in): grows on resume
        row["state"] = f"complete to {record.config.limit}"
    if spent:
        row["state"] += f", {len(spent)} unfinished"
    if row["tokens_per_s"] > 0 and row["tokens_per_item"] > 0:
        row["hours_left"] = tokens / row["tokens_per_s"] / 3600
    return row


def tokens_left(finished: list[float], spent: list[float], unstarted: float) -> tuple[float, float]:
    """(completion tokens a debate takes, tokens still to generate) from the totals of the
    finished debates, the tokens so far of the unfinished ones and the count not started.

    An unfinished debate is a right-censored observation: it takes at least what it has spent.
    With S the Kaplan-Meier survival function of a debate's total over both (`scipy.stats.ecdf`),
    a debate takes the area under S, and one that has spent s takes the area under S beyond s,
    divided by S(s), more. The estimate is restricted to the largest total seen: a debate past
    every finished one is priced at nothing more, and the area stops at a censored largest value.
    Without unfinished debates it is the plain mean; without finished ones, NaN.
    """
    from scipy import stats

    if not finished:
        return math.nan, math.nan
    sample = stats.CensoredData(uncensored=np.asarray(finished, float), right=np.asarray(spent, float))
    sf = stats.ecdf(sample).sf
    edges = np.r_[0.0, sf.quantiles]
    level = np.r_[1.0, sf.probabilities]  # S on [edges[i], edges[i + 1]) is level[i]

    def area_beyond(s: float) -> float:
        widths = np.clip(edges[1:], s, None) - np.clip(edges[:-1], s, None)
        return float(np.sum(widths * level[:-1]))

    mean = area_beyond(0.0)
    more = 0.0
    for s in spent:
        alive = level[np.searchsorted(edges, s, side="right") - 1]
        more += area_beyond(s) / alive if alive > 0 else 0.0
    return mean, float(unstarted * mean + more)


def session_rate(events: list[dict], since: float | None = None, gap_s: float = GAP_S) -> float:
    """Completion tokens a second over the run's latest stretch of model calls: the calls (cache
    hits left out) that finished after `since` (a Unix time: when the run last started), back from
    the last one until a pause of over `gap_s` seconds between two that finished (a stop that left
    no record), over the time from the first of them starting (not before `since`) to the last
    finishing; NaN without such calls."""
    since = since if since is not None else -math.inf
    made = sorted((e for e in events if not e.get("cache_hit") and isinstance(e.get("ts"), (int, float))
                   and e["ts"] > since), key=lambda e: e["ts"])
    if not made:
        return math.nan
    first = len(made) - 1
    while first > 0 and made[first]["ts"] - made[first - 1]["ts"] <= gap_s:
        first -= 1
    stretch = made[first:]
    begun = max(since, min(e["ts"] - (e.get("latency_s") or 0.0) for e in stretch))
    span = stretch[-1]["ts"] - begun
    tokens = sum(e.get("completion_tokens") or 0 for e in stretch)
    return tokens / span if span > 0 else math.nan


def last_start(record) -> float:
    """When a run last started, as a Unix time: its creation or its latest recorded `--resume`."""
    stamps = [record.created, *(r["at"] for r in record.resumes if isinstance(r.get("at"), str))]
    return max(datetime.fromisoformat(s).timestamp() for s in stamps)


def describe(table: pd.DataFrame) -> str:
    """The progress table as text, with a last line for what is left in all."""
    def number(value, fmt: str) -> str:
        return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, fmt)

    lines = [["point", "items", "accuracy [95% CI]", "tok/item", "tok/s", "hours left", "state"]]
    for r in table.itertuples():
        accuracy = "-" if math.isnan(r.accuracy) else f"{r.accuracy:.2f} [{r.low:.2f}, {r.high:.2f}]"
        limit = "?" if r.limit is None or (isinstance(r.limit, float) and math.isnan(r.limit)) else int(r.limit)
        lines.append([r.point, f"{r.done}/{limit}", accuracy, number(r.tokens_per_item, ",.0f"),
                      number(r.tokens_per_s, ".1f"), number(r.hours_left, ".1f"), r.state])
    text = aligned(lines)
    known = table["hours_left"].dropna()
    unknown = table.loc[table["hours_left"].isna(), "point"].tolist()
    total = f"left: about {known.sum():.1f} hours at each point's last measured rate"
    if unknown:
        total += f", and {len(unknown)} point(s) with no estimate yet ({', '.join(unknown)})"
    return "\n".join([*text, total])
