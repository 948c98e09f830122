"""The README's answer-format tables from the committed runs `<dataset>-single-<format>`.

    python -m benchmarks answer_formats

Three formats, the single agent at temperature 0 on the first 100 items of each benchmark:
`text` (free text ending `Answer: X`, the default), `json-steps` (today's JSON format: `reasoning`
a list of steps) and `json-string` (the JSON format before it, `reasoning` one string). Three
tables: text against the JSON format, the JSON format against its one-string predecessor, and
text against that predecessor (the comparison that showed JSON's loss).
Each row pairs two runs on the items both answered with `paired.compare` (bootstrap 95%
interval over items, exact McNemar p-value on the items where they disagree); the last row pools
the items of every benchmark (each item one pair) for the comparison across benchmarks. Parse
failures are counted on the paired items.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from debatekit.analysis import load_runs
from debatekit.analysis.paired import compare

HERE = Path(__file__).resolve().parent.parent / "results" / "examples"  # the committed runs it reads
DATASETS = ("arithmetic", "gsm8k", "strategyqa", "commonsenseqa")
PAIRS = (("text", "json-steps"), ("json-steps", "json-string"), ("text", "json-string"))


def paired_runs(dataset: str, config: str, baseline: str) -> pd.DataFrame | None:
    """Both formats' debates on one benchmark, item ids prefixed with the benchmark's name."""
    folders = {fmt: HERE / f"{dataset}-single-{fmt}" for fmt in (config, baseline)}
    if not all((f / "debates.jsonl").exists() for f in folders.values()):
        return None
    debates = pd.concat([load_runs([f]).debates.assign(answer_format=fmt) for fmt, f in folders.items()],
                        ignore_index=True)
    return debates.assign(item_id=dataset + ":" + debates["item_id"].astype(str))


def row(name: str, debates: pd.DataFrame, config: str, baseline: str) -> str:
    c = compare(debates, baseline=baseline, by="answer_format").iloc[0]
    paired = debates[debates["item_id"].isin(set.intersection(
        *(set(g["item_id"]) for _, g in debates.groupby("answer_format"))))]
    parse = paired.groupby("answer_format")["parse_failures"].sum()
    n = int(c["pairs"])
    return (f"| {name} | {n} | {c['accuracy']:.2f} ({round(c['accuracy'] * n)}/{n}) | "
            f"{c['baseline_accuracy']:.2f} ({round(c['baseline_accuracy'] * n)}/{n}) | "
            f"{c['difference']:+.2f} [{c['low']:+.2f}, {c['high']:+.2f}] | {int(c['only_config'])} / "
            f"{int(c['only_baseline'])}, p = {c['p_mcnemar']:.2g} | {int(parse.get(config, 0))} / "
            f"{int(parse.get(baseline, 0))} | {c['completion_tokens']:.0f} / {c['baseline_completion_tokens']:.0f} |")


def table(config: str, baseline: str) -> list[str]:
    runs = {name: paired_runs(name, config, baseline) for name in DATASETS}
    runs = {name: d for name, d in runs.items() if d is not None}
    if not runs:
        return []
    lines = [row(name, d, config, baseline) for name, d in runs.items()]
    if len(runs) > 1:  # every item of every benchmark, one pair each
        lines.append(row("all (pooled)", pd.concat(runs.values(), ignore_index=True), config, baseline))
    a, b = config, baseline
    return [f"| dataset | items | {a} | {b} | {a} - {b} [95% CI] | only {a} right / only {b} right, McNemar "
            f"| parse failures {a} / {b} | completion tokens per item {a} / {b} |",
            "|---|---|---|---|---|---|---|---|", *lines, ""]


def main(argv: list[str]) -> int:
    for config, baseline in PAIRS:
        print("\n".join(table(config, baseline)))
    return 0
