"""What `debatekit run` prints when its runs end: the run table, each multi-round run by round, a
protocol's own report, and several runs paired against the first (`debatekit fork` prints them too).

The run table fits `TABLE_WIDTH` columns unless `--wide`; the columns it leaves out are named when
they have something to say.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from debatekit.records.schemas import RunSummary

TABLE_WIDTH = 100
"""Characters the run table takes at most without --wide (a long protocol name aside)."""
NARROW = ("protocol", "params", "items", "seeds", "failed", "accuracy [95% CI]", "rounds", "calls", "tokens", "wall s")
"""The run table's columns without --wide (seeds only where a run has several)."""


def summary_table(results, wide: bool = False) -> str:
    """The comparison table printed at the end of `debatekit run`: every column if `wide`, else
    `NARROW`, with long parameters cut to fit `TABLE_WIDTH` and a line naming the left-out columns
    that have something to say."""
    head = ("protocol", "params", "items", "seeds", "failed", "degraded", "accuracy [95% CI]", "rounds", "calls",
            "tokens", "cached", "cut off", "unread: cut off", "looped", "other", "echoes", "escalated", "wall s")
    rows = [head]
    for r in results:
        s, cfg = r.summary, r.record.config
        if s.accuracy is not None:
            acc = f"{s.accuracy:.2f} [{s.accuracy_ci[0]:.2f}, {s.accuracy_ci[1]:.2f}]"
        elif s.score is not None:  # no ground truth: the protocol's own score (judge, F1, ...)
            acc = f"score {s.score:.2f} [{s.score_ci[0]:.2f}, {s.score_ci[1]:.2f}]"
        else:
            acc = "n/a"
        params = " ".join(f"{k}={v}" for k, v in cfg.params.items()) or "-"
        rows.append((cfg.protocol, params, str(s.items), str(s.seeds), str(s.failed), str(s.degraded), acc,
                     f"{s.mean_rounds:.1f}" if s.mean_rounds is not None else "-", str(s.calls),
                     str(s.prompt_tokens + s.completion_tokens), str(s.cache_hits), *_parse_failures(s),
                     " ".join(f"{n} {to}" for to, n in s.escalated_to.items()) or "0", f"{s.wall_s:.0f}"))
    from debatekit.analysis.paired import aligned

    note = ""
    if not wide:
        rows, note = _narrow(rows)
    table = "\n".join(aligned(rows)) + "\n" + note
    where = "\n".join(f"trace: {r.path}" for r in results)
    return table + "".join(round_table(r) + protocol_report(r) for r in results) + where


def _narrow(rows: list[tuple[str, ...]]) -> tuple[list[tuple[str, ...]], str]:
    """The `NARROW` columns of the run table, its parameters cut to fit `TABLE_WIDTH`, and a line
    naming the left-out columns that are not all zero (empty if none)."""
    head = rows[0]
    several_seeds = any(row[head.index("seeds")] != "1" for row in rows[1:])
    keep = [i for i, name in enumerate(head) if name in NARROW and (name != "seeds" or several_seeds)]
    shown = [tuple(row[i] for i in keep) for row in rows]
    widths = [max(len(row[i]) for row in shown) for i in range(len(keep))]
    room = TABLE_WIDTH - (sum(widths) + 2 * (len(widths) - 1)) + widths[1]  # what the params column may take
    cut = max(len("params"), room)
    shown = [(row[0], row[1] if len(row[1]) <= cut else row[1][:cut - 1] + "…", *row[2:]) for row in shown]
    left = [name for i, name in enumerate(head) if i not in keep and name not in ("cached", "seeds")
            and any(row[i] not in ("0", "?", "-") for row in rows[1:])]
    return shown, f"(not all zero in columns left out: {', '.join(left)}; --wide shows them)\n" if left else ""


def _parse_failures(summary: RunSummary) -> tuple[str, ...]:
    """A run's replies cut off at the token limit (read or not; "?" where a record did not count them),
    its parse failures by cause (cut off, stopped looping, the rest), and its echoed answers."""
    cut, looped, every = summary.cut_off_unread, summary.looped, summary.cut_off
    return ("?" if every is None else str(every), str(cut), str(looped), str(summary.parse_failures - cut - looped),
            str(summary.echoes))


def protocol_report(result) -> str:
    """The protocol's own summary of the run (stage F1 of patch_debate, resolution accuracy of arbitration)."""
    from debatekit import registry

    report = registry.get(result.record.config.protocol).views.run
    text = report(result.path) if report else ""
    return f"\n{result.record.config.protocol}: {text.rstrip()}\n\n" if text else ""


def round_table(result) -> str:
    """Per-round dynamics of a multi-round run (empty for single-round runs)."""
    import pandas as pd

    from debatekit.analysis import load_runs, round_metrics

    tables = load_runs([result.path])
    metrics = round_metrics(tables)
    if metrics.empty or metrics["round"].max() < 2 or metrics["agent_accuracy"].isna().all():
        return ""  # single round, or no ground truth to score rounds against (free-text answers)
    lines = [f"\n{result.record.config.protocol} by round (debates still running at that round):",
             "round  debates  agent acc  majority acc  agreement  wrong->right  right->wrong  cut off  echoes"]
    for row in metrics.itertuples():
        cut = "?" if pd.isna(row.cut_off) else f"{row.cut_off:.0f}"
        echo = "?" if pd.isna(row.echo_rate) else f"{row.echo_rate:.0%}"
        lines.append(f"{row.round:<5}  {row.debates:<7}  {row.agent_accuracy:<9.2f}  {row.majority_accuracy:<12.2f}  "
                     f"{row.agreement:<9.2f}  {row.wrong_to_right:<12}  {row.right_to_wrong:<12}  {cut:<7}  {echo}")
    return "\n".join(lines) + "\n\n" + decomposition_table(tables)


def decomposition_table(tables) -> str:
    """A society_of_mind run read as one agent, round-1 vote and debate, paired (empty for other runs)."""
    from debatekit.analysis.decompose import decomposition
    from debatekit.analysis.paired import paired_lines

    table = decomposition(tables) if (tables.debates["protocol"] == "society_of_mind").any() else None
    if table is None or table.empty:
        return ""
    lines = paired_lines(table, {"configuration": "config", "against": "baseline"})
    return ("debate or vote, inside this run (single: agent 1's round-1 answer; vote@1: the round-1 majority; "
            "debate@t: the majority after round t):\n" + "\n".join(lines) + "\n\n")


def paired_block(results) -> str:
    """Each run against the first, paired on the items (and seeds) both answered."""
    from debatekit.analysis import load_runs
    from debatekit.analysis.paired import compare_runs, format_comparison

    return format_comparison(compare_runs(load_runs([r.path for r in results]), [r.record for r in results]))
