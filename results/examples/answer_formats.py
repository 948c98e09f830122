"""The README's answer-format tables from the committed runs `<dataset>-single-<format>`.

    .venv/bin/python results/examples/answer_formats.py

Three formats, the single agent at temperature 0 on the first 100 items of each benchmark:
`text` (free text ending `Answer: X`, the default), `json-steps` (today's JSON format: `reasoning`
a list of steps) and `json-string` (the JSON format before it, `reasoning` one string). Two
tables: text against the JSON format, and the JSON format against its one-string predecessor.
Each row pairs two runs on the items both answered with `paired.compare` (bootstrap 95%
interval over items, exact McNemar p-value on the items where they disagree).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from debatekit.analysis import load_runs
from debatekit.paired import compare

HERE = Path(__file__).resolve().parent
DATASETS = ("arithmetic", "gsm8k", "strategyqa", "commonsenseqa")
PAIRS = (("text", "json-steps"), ("json-steps", "json-string"))


def row(dataset: str, config: str, baseline: str) -> str | None:
    folders = {fmt: HERE / f"{dataset}-single-{fmt}" for fmt in (config, baseline)}
    if not all((f / "debates.jsonl").exists() for f in folders.values()):
        return None
    debates = pd.concat([load_runs([f]).debates.assign(answer_format=fmt) for fmt, f in folders.items()],
                        ignore_index=True)
    c = compare(debates, baseline=baseline, by="answer_format").iloc[0]
    parse = debates.groupby("answer_format")["parse_failures"].sum()
    n = int(c["pairs"])
    return (f"| {dataset} | {n} | {c['accuracy']:.2f} ({round(c['accuracy'] * n)}/{n}) | "
            f"{c['baseline_accuracy']:.2f} ({round(c['baseline_accuracy'] * n)}/{n}) | "
            f"{c['difference']:+.2f} [{c['low']:+.2f}, {c['high']:+.2f}] | {int(c['only_config'])} / "
            f"{int(c['only_baseline'])}, p = {c['p_mcnemar']:.2g} | {int(parse.get(config, 0))} / "
            f"{int(parse.get(baseline, 0))} | {c['completion_tokens']:.0f} / {c['baseline_completion_tokens']:.0f} |")


def table(config: str, baseline: str) -> list[str]:
    lines = [row(name, config, baseline) for name in DATASETS]
    if not any(lines):
        return []
    a, b = config, baseline
    return [f"| dataset | items | {a} | {b} | {a} - {b} [95% CI] | only {a} right / only {b} right, McNemar "
            f"| parse failures {a} / {b} | completion tokens per item {a} / {b} |",
            "|---|---|---|---|---|---|---|---|", *filter(None, lines), ""]


if __name__ == "__main__":
    for config, baseline in PAIRS:
        print("\n".join(table(config, baseline)))
