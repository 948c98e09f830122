"""Pure logic over root-cause hypotheses (judge_refine, seed 004): no model calls.

- `judge_order`: the shuffled, source-hidden order in which the judge sees hypotheses.
- `agree` / `consensus`: when reasoners "agree on the same hypothesis".
- `keyword_match`: whether a hypothesis names the true cause (dataset keywords).
- `key_log_lines`: the error/warning lines of a log excerpt (what the judge sees of the logs).
- `resolution_steps`: a free-text resolution split into numbered steps (the printed report).
"""

from __future__ import annotations

import random
import re
from typing import Any, Iterable, Sequence

from debatekit.engine import derive_seed

KEY_LINE = re.compile(
    r"\b(ERROR|WARN|WARNING|FATAL|CRIT|CRITICAL|SEVERE|PANIC|FIRING|Exception|Error|error|fail(ed|ure)?|"
    r"denied|refused|timed? ?out|exceeded|killed|OOM|no space|unreachable|dropping|expired|skew)\b",
    re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9][a-z0-9_./-]*")


def judge_order(sources: Sequence[tuple[str, int]], *parts: Any, shuffle: bool = True) -> list[dict]:
    """The order the judge sees hypotheses in, with neutral labels H1..Hn.

    Args:
        sources: (reasoner, index in that reasoner's list) of every hypothesis, in reasoner order.
        parts: what the shuffle is seeded from (run seed, item id, round): the same debate
            always gets the same order, different rounds and items get different orders.
        shuffle: False keeps reasoner order (for an ablation of the bias guard).

    Returns:
        One `{"label", "source", "index"}` per hypothesis, in presentation order.
    """
    order = list(sources)
    if shuffle:
        random.Random(derive_seed("judge_order", *parts)).shuffle(order)
    return [{"label": f"H{i + 1}", "source": s, "index": k} for i, (s, k) in enumerate(order)]


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def components_overlap(a: Iterable[str], b: Iterable[str]) -> bool:
    """Whether two component lists name a common component.

    Components match when, lower-cased, one contains the other ("DataNode dn-07" and "dn-07")
    or they share a word of 3+ characters that is not generic ("server", "service", ...).
    """
    a = [x.strip().lower() for x in a if x and x.strip()]
    b = [x.strip().lower() for x in b if x and x.strip()]
    for x in a:
        for y in b:
            if x in y or y in x:
                return True
            shared = {w for w in _words(x) & _words(y) if len(w) >= 3 and w not in GENERIC}
            if shared:
                return True
    return False


def agree(a: dict, b: dict) -> bool:
    """Two hypotheses name the same root cause: same category and overlapping affected components."""
    return (a.get("category") == b.get("category")
            and components_overlap(a.get("affected_components") or [], b.get("affected_components") or []))


def consensus(tops: dict[str, dict | None]) -> bool:
    """All reasoners agree on the same hypothesis: each has a top hypothesis and all pairs `agree`."""
    hyps = list(tops.values())
    if len(hyps) < 2 or any(h is None for h in hyps):
        return False
    return all(agree(hyps[i], hyps[j]) for i in range(len(hyps)) for j in range(i + 1, len(hyps)))


def keyword_match(text: str, keywords: Sequence[str | Sequence[str]]) -> tuple[bool, list[bool]]:
    """Whether `text` names every keyword group (case-insensitive substring; a group is a synonym list).

    Returns:
        (all groups matched, per-group matched).
    """
    low = text.lower()
    groups = [[k] if isinstance(k, str) else list(k) for k in keywords]
    hits = [any(s.lower() in low for s in group) for group in groups]
    return bool(groups) and all(hits), hits


def key_log_lines(logs: str, limit: int) -> list[str]:
    """Up to `limit` error/warning lines of a log excerpt, in order, each cut to 220 characters."""
    lines = [line.strip() for line in logs.splitlines() if line.strip() and KEY_LINE.search(line)]
    if len(lines) > limit:  # keep the first and the last ones: onset and current state
        half = limit // 2
        lines = lines[:limit - half] + lines[len(lines) - half:] if half else lines[:limit]
    return [line if len(line) <= 220 else line[:217] + "..." for line in lines]


def resolution_steps(text: str) -> list[str]:
    """A resolution as steps: split on "1." / "2)" numbering, else on ";" or sentences."""
    text = (text or "").strip()
    if not text:
        return []
    numbered = [s.strip(" ;,") for s in re.split(r"(?:^|\s)\d+[.)]\s+", text) if s.strip(" ;,")]
    if len(numbered) > 1:
        return numbered
    parts = re.split(r";\s+|(?<=[.!])\s+(?=[A-Z])", text)
    return [p.strip(" ;") for p in parts if p.strip(" ;")]


def display_name(reasoner: str) -> str:
    """`log_focused` -> `Log-Focused`, `kg_focused` -> `KG-Focused` (the seed's report names)."""
    return "-".join(p.upper() if p in ("kg", "llm", "rca") else p.capitalize() for p in reasoner.split("_"))


GENERIC = {"the", "and", "server", "service", "node", "host", "system", "cluster", "prod", "production",
           "application", "app", "component", "process", "database"}
