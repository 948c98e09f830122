"""`debatekit show RUN_DIR [ITEM] [--transcript]`: one debate of a run, printed for reading.

A protocol registered with `views=Views(debate=...)` prints its own report (for
judge_refine, the seed's report); any other protocol gets the generic view: rounds with each
agent's answer and the round data, the outcome, the stop reason and the usage. Without ITEM,
a one-line-per-item list of the run and, for a debate of several agents over several rounds, its
conformity per round pair (`debatekit.analysis.conformity`). `--transcript` prints every call of the debate instead:
the messages the agent was shown, its reply and the answer read from it (`debatekit.records.transcript`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from debatekit.records.schemas import DebateRecord
from debatekit.records.trace import RunFolder, RunFolderError, item_folder_name


def add(subparsers) -> dict[str, Callable]:
    show = subparsers.add_parser("show", help="print one debate of a run (the protocol's report)")
    show.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (with run.json)")
    show.add_argument("item", metavar="ITEM", nargs="?", help="item id; omitted: list the run's items")
    show.add_argument("--transcript", action="store_true",
                      help="every message each agent was shown and what it replied, round by round")
    return {"show": cmd_show}


def cmd_show(args) -> int:
    from debatekit._base.terminal import visible

    print(visible(show(args.run_dir, args.item, transcript=args.transcript)))
    return 0


def show(run_dir: str | Path, item: str | None = None, transcript: bool = False) -> str:
    """The text `debatekit show` prints (with `transcript`, the debate's calls in full).

    Raises:
        RunFolderError: not a run folder, or no debate for `item` in it.
    """
    folder = RunFolder(run_dir)
    if not folder.exists:
        raise RunFolderError(f"{folder.path} is not a run folder (no run.json)")
    debates = {d.item_id: d for d in folder.debates()}
    if item is None:
        record = folder.read_run()
        return (fork_line(folder.path, record) + state_line(folder.path, record, len(debates))
                + item_list(list(debates.values())) + conformity_block(list(debates.values())))
    if item not in debates:
        ids = ", ".join(list(debates)[:10]) or "none"
        raise RunFolderError(f"no debate for item {item!r} in {folder.path}; items: {ids}")
    record = debates[item]
    if transcript:
        from debatekit.records import transcript as calls

        head = f"{record.protocol} · item {record.item_id} · debate {record.debate_id} · transcript\n"
        return head + calls.as_text(calls.entries(folder.events(), record.debate_id)) + (
            f"\n\nfinal answer: {_short(record.final_answer)}  truth: {_short(record.truth)}  "
            f"correct: {_cell(record.correct)}")
    item_folder = folder.path / "items" / item_folder_name(item)
    custom = protocol_report(record.protocol)
    if custom is not None and record.status == "ok":
        return custom(record, item_folder if item_folder.is_dir() else None)
    return generic(record, item_folder)


def state_line(path: Path | str, record, recorded: int) -> str:
    """For a run that did not end complete, a line saying so and how many debates it holds (its
    figures are a part of the run's); "" for a complete run."""
    if record.status == "complete":
        return ""
    planned = f" of {record.config.limit}" if record.config.limit is not None else ""
    why = {"running": "run.json says running: it is still being written, or its process was killed",
           "interrupted": "it was interrupted", "failed": "it failed"}.get(record.status, f"it is {record.status}")
    reason = f" ({record.reason})" if record.reason and record.status != "running" else ""
    return f"{path}: {why}{reason}; {recorded}{planned} debates recorded (--resume continues it)\n\n"


def fork_line(path: Path, record) -> str:
    """For a fork (its folder and run record), the line that names its parent, the fork round and the
    change; "" for any other run."""
    parent = record.parent
    if parent is None:
        return ""
    change = parent.intervention
    what = "no change" if change is None else change.get("name", "?") + "".join(
        f" {k}={v}" for k, v in (change.get("params") or {}).items())
    extra = "".join(f", {k} {v}" for k, v in (("model", parent.model), ("resample", parent.resample)) if v is not None)
    extra += "".join(f", set {k}={v}" for k, v in (parent.params or {}).items())
    where = Path(os.path.normpath(path / parent.run))  # as seen from here, not from the fork's folder
    shown = os.path.relpath(where) if not where.is_absolute() or where.is_relative_to(Path.cwd()) else where
    return f"fork of {shown} at round {parent.at_round}: {what}{extra}\n\n"


def protocol_report(name: str) -> Callable | None:
    """The protocol's registered `Views.debate(record, folder)`, if it has one (None for an unknown protocol)."""
    from debatekit import registry

    return registry.views_of(name).debate


def item_list(debates: list[DebateRecord]) -> str:
    head = ("item", "status", "correct", "score", "rounds", "stop", "calls", "tokens", "wall s")
    rows = [head] + [(_one_line(d.item_id), d.status, _cell(d.correct), _cell(d.score), str(len(d.rounds)),
                      d.stopped or "-", str(d.usage.calls),
                      str(d.usage.prompt_tokens + d.usage.completion_tokens), f"{d.wall_s:.1f}") for d in debates]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def conformity_block(debates: list[DebateRecord]) -> str:
    """The conformity table printed under the item list ("" for one round or one agent): per round pair,
    the share of agent answers kept, moved to the earlier round's majority or elsewhere, the right
    answers lost and the wrong ones mended by agents in the minority and in the majority, and the
    martingale test."""
    from debatekit.analysis.conformity import conformity_summary
    from debatekit.analysis.paired import aligned
    from debatekit.analysis.tables import rounds_table

    rounds = rounds_table(debates)
    if rounds.empty or rounds.groupby("debate_id")["agent"].nunique().max() < 2:
        return ""
    table = conformity_summary(rounds, by=())
    if table.empty:
        return ""
    head = ("rounds", "answers", "kept", "to majority", "elsewhere", "right->wrong: minority", "majority",
            "wrong->right: minority", "majority", "accuracy change [95% CI]")
    rows = [head] + [(f"{r.from_round}->{r.to_round}", str(r.transitions), _rate(r.keep), _rate(r.to_majority),
                      _rate(r.away), _of(r.right_to_wrong_minority, r.right_in_minority),
                      _of(r.right_to_wrong_majority, r.right_in_majority),
                      _of(r.wrong_to_right_minority, r.wrong_in_minority),
                      _of(r.wrong_to_right_majority, r.wrong_in_majority),
                      "-" if r.change != r.change else f"{r.change:+.3f} [{r.low:+.3f}, {r.high:+.3f}]")
                     for r in table.itertuples()]
    return ("\n\nconformity: agent answers kept, moved to the earlier round's majority or elsewhere; right answers\n"
            "lost and wrong ones mended, in the minority and in the majority; an agent's accuracy change, 95%\n"
            "interval over items (0 inside: as the martingale claim of Choi et al. 2025 has it; see\n"
            "docs/guides/conformity.md)\n"
            + "\n".join(aligned(rows)))


def _rate(value: float) -> str:
    return "-" if value != value else f"{value:.2f}"


def _of(rate: float, among: float) -> str:
    """A rate with the number it is a share of: `0.08 of 164`."""
    return "-" if rate != rate else f"{rate:.2f} of {among:.0f}"


def generic(d: DebateRecord, item_folder: Path) -> str:
    """A protocol-independent view of one debate record."""
    lines = [f"{d.protocol} · item {d.item_id} · debate {d.debate_id} · {d.status}"]
    if d.error:
        lines.append(f"error: {d.error}")
    for r in d.rounds:
        lines.append(f"\nround {r.round}")
        width = max((len(a) for a in r.answers), default=0)
        lines += [f"  {agent.ljust(width)}  {_short(answer)}" for agent, answer in r.answers.items()]
        lines += [f"  · {key}: {_short(value)}" for key, value in r.extra.items()]
    u = d.usage
    lines += ["", f"final answer: {_short(d.final_answer)}", f"truth: {_short(d.truth)}",
              f"correct: {_cell(d.correct)}  score: {_cell(d.score)}",
              f"stop reason: {d.stopped or '-'}  converged: {_cell(d.converged)}  rounds: {len(d.rounds)}",
              f"needs human review: {d.needs_human_review}" + (f" ({d.escalation_reason})" if d.escalation_reason else ""),
              f"usage: {u.calls} calls, {u.prompt_tokens} prompt + {u.completion_tokens} completion tokens, "
              f"{u.cache_hits} cached, {u.parse_failures} parse failures, {u.retries} retries, "
              f"{u.timeouts} timeouts, {u.errors} errors; wall {d.wall_s:.1f} s"]
    if d.log:
        lines += ["log:", *(f"  {line}" for line in d.log)]
    files = sorted(p.name for p in item_folder.glob("*.json")) if item_folder.is_dir() else []
    if files:
        lines.append(f"files ({item_folder}): {', '.join(files)}")
    return "\n".join(lines)


def _one_line(text: str) -> str:
    """A table cell on one line: a line break in an item id is shown as `\\n`, not obeyed."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
