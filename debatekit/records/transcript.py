"""Transcripts: what each agent was shown and what it replied, call by call, from `events.jsonl`.

Each call event carries the messages the agent was shown. An agent that keeps a conversation
is shown its own earlier turns again; a transcript entry lists only the messages that are new
since that agent's previous call, so a debate reads round by round without repeats. Runs
recorded before messages were kept give entries without them (`shown` is None). A call a fork's
intervention changed (what the agent read, an added instruction, another model) says so first.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

NO_ANSWER = "none given"
"""A reply that parsed with an empty answer (a moderator without a preference, say)."""
FREE_TEXT = "none asked (free text: this call does not answer the question)"
"""A call with no answer to read (a summary, a judge's question)."""


@dataclass
class Entry:
    """One model call of a debate."""

    round: int | None
    agent: str
    phase: str
    shown: list[dict] | None
    reply: str
    answer: Any
    ok: bool
    error: str | None = None
    faults: tuple[str, ...] = ()
    repairs: tuple[dict, ...] = ()
    """Earlier replies that could not be read, each with its error and the repair prompt that followed."""
    changes: tuple[dict, ...] = ()
    """What an intervention changed in this call (`CallEvent.intervention`)."""

    @property
    def changed(self) -> list[str]:
        """Each change an intervention made, as one line."""
        lines = []
        for change in self.changes:
            name = change.get("intervention")
            what = "; ".join(f"{k}: {v}" for k, v in change.items() if k != "intervention")
            lines.append(f"[intervention{f' {name}' if name else ''}] {what}")
        return lines

    @property
    def ending(self) -> str | None:
        """How the call's reply (or a first reply the model was asked to repair) failed to finish."""
        looped, cut = self.faults.count("loop"), self.faults.count("cut_off")
        if not looped and not cut:
            return None
        what = " and ".join(part for part in (f"looped ({looped}x, stopped while repeating itself)" if looped else "",
                                              f"cut off at the token limit ({cut}x)" if cut else "") if part)
        return f"{what}; {'not repaired' if self.error else 'answer from the repair request'}"

    @property
    def marked(self) -> str:
        """The answer read from the reply, or why there is none."""
        if self.error:
            return f"no answer ({self.error})"
        if self.answer is not None:
            return str(self.answer)
        return NO_ANSWER if self.ok else FREE_TEXT


def entries(events: list[dict], debate_id: str) -> list[Entry]:
    """The calls of one debate in the order they finished, with the messages new to each agent."""
    seen: dict[str, list[dict]] = {}  # agent -> its conversation at its last call: shown, then its reply
    out = []
    for event in sorted((e for e in events if e.get("debate_id") == debate_id), key=lambda e: e.get("ts", 0)):
        messages = event.get("messages")
        agent = event["agent"]
        shown = None
        if messages is not None:
            # new = what follows the part the agent already had (a protocol may drop a failed reply)
            before = seen.get(agent, [])
            start = next((k for k, (a, b) in enumerate(zip(before, messages)) if a != b), min(len(before), len(messages)))
            shown = messages[start:]
            seen[agent] = [*messages, {"role": "assistant", "content": event.get("text") or ""}]
        output = event.get("output")
        answer = output.get("answer") if isinstance(output, dict) else None
        out.append(Entry(round=event.get("round"), agent=agent, phase=event.get("phase", ""), shown=shown,
                         reply=event.get("text") or "", answer=answer, ok=output is not None and not event.get("error"),
                         error=event.get("error"), faults=tuple(event.get("faults") or ()),
                         repairs=tuple(event.get("repairs") or ()),
                         changes=tuple(event.get("intervention") or ())))
    return out


def as_text(items: list[Entry]) -> str:
    """The transcript for a terminal: round headers, each call's new messages, its reply and answer."""
    lines, current = [], object()
    for e in items:
        if e.round != current:
            current = e.round
            lines.append(f"\n=== round {e.round if e.round is not None else '-'} ===")
        lines.append(f"\n--- {e.agent} · {e.phase} ---")
        lines += e.changed
        if e.shown is None:
            lines.append("[shown: not recorded in this run]")
        for m in e.shown or []:
            lines += [f"[{m.get('role', '?')}]", str(m.get("content", "")).rstrip()]
        for r in e.repairs:
            lines += [f"[reply, not read: {r.get('error', '?')}]", str(r.get("text", "")).rstrip() or "(empty)",
                      "[user: repair]", str(r.get("repair_prompt", "")).rstrip()]
        ending = f" [{e.ending}]" if e.ending else ""
        lines += [f"[reply]{ending}", e.reply.rstrip() or "(empty)", f">>> answer: {e.marked}"]
    return "\n".join(lines).lstrip("\n")


def as_html(items: list[Entry]) -> str:
    """The same transcript as HTML (the explorer's transcript panel)."""
    parts = []
    for e in items:
        shown = "".join(f"<div><i>{html.escape(str(m.get('role', '?')))}</i>:<pre>{html.escape(str(m.get('content', '')))}"
                        f"</pre></div>" for m in e.shown or []) if e.shown is not None else "<i>shown: not recorded</i>"
        repairs = "".join(f"<div><i>reply, not read: {html.escape(str(r.get('error', '?')))}</i>:"
                          f"<pre>{html.escape(str(r.get('text', '')))}</pre><i>repair</i>:"
                          f"<pre>{html.escape(str(r.get('repair_prompt', '')))}</pre></div>" for r in e.repairs)
        notes = "".join(f"<div><i>{html.escape(line)}</i></div>" for line in e.changed)
        parts.append(f"<div class='dk-call'><b>{html.escape(e.agent)}</b> · {html.escape(e.phase)}{notes}"
                     f"<details><summary>shown</summary>{shown}</details>{repairs}"
                     f"<div><i>reply</i>{html.escape(f' [{e.ending}]' if e.ending else '')}:"
                     f"<pre>{html.escape(e.reply)}</pre></div>"
                     f"<div><b>answer: {html.escape(e.marked)}</b></div></div>")
    return "".join(parts) or "<i>no calls in this round</i>"
