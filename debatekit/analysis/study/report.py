"""The report's conclusion in plain sentences, written from the comparison tables."""

from __future__ import annotations

import pandas as pd

from debatekit.analysis.study.comparisons import ALPHA, distinct


def conclusion(against_single: pd.DataFrame, inner: pd.DataFrame, dataset: str, agreement: float | None,
               against_reference: pd.DataFrame | None = None, primary_row: pd.DataFrame | None = None) -> str:
    """The study's conclusion in plain sentences, every number taken from the tables passed in.

    `primary_row` (`primary`: the comparison the grid registers) comes first, tested alone at
    `ALPHA`. `against_reference` (`paired` against self-consistency, the vote at the debate's budget)
    adds the equal-cost question: each configuration but one agent against it, with both budgets as
    measured (completion tokens per item on the shared items).

    An exploratory difference separates only where its bootstrap interval excludes zero *and* the
    exact McNemar test rejects at `ALPHA` after Holm's adjustment (`p_holm`, where the tables carry
    it; the raw p otherwise); where only the interval excludes zero, the sentence says so. A
    comparison that does not separate says what its 90% interval rules out against the margin.
    """
    def say(row) -> str:
        holm = getattr(row, "p_holm", float("nan"))
        adjusted = f", Holm p = {holm:.2g}" if pd.notna(holm) else ""
        return (f"{row.difference:+.2f} [{row.low:+.2f}, {row.high:+.2f}], McNemar p = {row.p_mcnemar:.2g}{adjusted}, "
                f"{row.pairs} items")

    def verdict(row, up: str, down: str, neither: str, what: str) -> str:
        side = up if row.low > 0 else down if row.high < 0 else None
        if side is None:
            return f"{neither} {what}"
        return f"{side} {what}" + ("" if _separates(row) else " by its interval only, not by the exact test")

    lines = []
    registered_pairs = set()
    for r in (primary_row if primary_row is not None else pd.DataFrame()).itertuples():
        registered_pairs.add((r.config, r.baseline))
        v = verdict(r, "above", "below", "not separable from", r.baseline)
        lines.append(f"- Primary comparison (registered in the grid, tested alone): {r.config} is {v} "
                     f"({r.difference:+.2f} [{r.low:+.2f}, {r.high:+.2f}], McNemar p = {r.p_mcnemar:.2g}, "
                     f"{r.pairs} items); {_equivalence(r)}.")
    for r in distinct(against_single).itertuples():
        lines.append(f"- {r.config}: {verdict(r, 'above', 'below', 'not separable from', 'one agent')} ({say(r)}).")
    for r in inner.itertuples():
        if r.baseline == "vote@1":
            v = verdict(r, "adds to", "takes from", "does not separate from", "the round-1 majority vote")
            lines.append(f"- Inside the debate run, {r.config} {v} ({say(r)}).")
    for r in distinct(against_reference if against_reference is not None else pd.DataFrame()).itertuples():
        if r.config == "single" or not r.pairs > 0 or (r.config, r.baseline) in registered_pairs:
            continue  # one agent is no equal-cost rival; the primary comparison was said first
        v = verdict(r, "above", "below", "not separable from", r.baseline)
        lines.append(f"- Against {r.baseline}{_tokens(r.baseline_completion_tokens, ' per item')}, {r.config}"
                     f"{_cost_share(r)} is {v} ({say(r)}).")
    lines += _what_nulls_rule_out(against_single)
    if agreement is not None:
        lines.append(f"- The three agents gave the same round-1 answer on {agreement:.0%} of items: there the vote is "
                     f"one agent repeated.")
    return f"On {dataset}:\n" + "\n".join(lines)


def _tokens(value, unit: str = "") -> str:
    """` (N completion tokens<unit>)`, or nothing where the count is unknown or zero (a provider that reports no usage)."""
    return f" ({value:,.0f} completion tokens{unit})" if pd.notna(value) and value > 0 else ""


def _cost_share(row) -> str:
    """The configuration's completion tokens per item against the baseline's: equal cost within 10%
    (the budget the study sets self-consistency to), else the share."""
    mine, theirs = row.completion_tokens, row.baseline_completion_tokens
    if not (pd.notna(mine) and pd.notna(theirs) and theirs > 0):
        return ""
    share = mine / theirs
    said = "the same cost within 10%" if abs(share - 1) <= 0.10 else f"{share:.0%} of its cost"
    return f" ({mine:,.0f}, {said})"


def _separates(row) -> bool:
    """The interval excludes zero and the exact test rejects (after Holm's adjustment where the row has it)."""
    holm = getattr(row, "p_holm", float("nan"))
    return (row.low > 0 or row.high < 0) and (holm if pd.notna(holm) else row.p_mcnemar) < ALPHA


def _equivalence(row) -> str:
    """What a comparison's 90% interval says against its margin (TOST)."""
    if not pd.notna(getattr(row, "low90", float("nan"))):
        return "no interval to test equivalence on"
    where = f"90% interval [{row.low90:+.2f}, {row.high90:+.2f}]"
    if row.p_tost < ALPHA:
        return f"{where}: equivalent within +-{row.margin:.2f} (TOST p = {row.p_tost:.2g})"
    return f"{where}: not shown equivalent within +-{row.margin:.2f} (TOST p = {row.p_tost:.2g})"


def _what_nulls_rule_out(against_single: pd.DataFrame) -> list[str]:
    """How many comparisons with one agent did not separate, and what the 90% interval of each whose
    95% interval holds zero rules out against the margin (TOST)."""
    rows = list(distinct(against_single).itertuples())
    nulls = [r for r in rows if not _separates(r)]
    if not nulls:
        return []
    line = (f"- None of the {len(rows)} comparisons with one agent separates." if len(nulls) == len(rows)
            else f"- {len(nulls)} of {len(rows)} comparisons with one agent do not separate.")
    flat = [r for r in nulls if r.low <= 0 <= r.high]  # the interval-only ones are not nulls to bound
    if flat:
        line += " What each rules out: " + "; ".join(f"{r.config}, {_equivalence(r)}" for r in flat) + "."
    return [line]
