"""What a human reviewer reads of an escalated cross_critique debate: its summary's conflicts and claims."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def review_lines(folder: Path) -> list[str]:
    """The conflicts, disputed and agreed claims of `debate_summary.json` (8 of each at most)."""
    summary = Path(folder) / "debate_summary.json"
    if not summary.is_file():
        return []
    data = json.loads(summary.read_text(encoding="utf-8"))
    lines = []
    for key in ("conflicts", "disputed_claims", "agreed_claims"):
        if isinstance(data.get(key), list):
            lines.append(f"{key.replace('_', ' ')} ({len(data[key])}):")
            lines.extend(f"  - {_line(row)}" for row in data[key][:8])
    return lines


def _line(row: Any) -> str:
    if not isinstance(row, dict):
        return str(row)
    who = "/".join(str(row[k]) for k in ("agent", "critic", "target", "claim_id") if row.get(k))
    text = row.get("statement") or row.get("description") or json.dumps(row, ensure_ascii=False)
    severity = f"[{row['severity']}] " if row.get("severity") else ""
    return f"{who}: {severity}{text}"[:300]
