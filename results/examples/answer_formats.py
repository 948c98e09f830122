"""The README's answer-format table from the committed runs `<dataset>-single-{text,json}`.

    .venv/bin/python results/examples/answer_formats.py

For each dataset with both runs: the single agent's accuracy in each format on the items both
runs answered, and the paired difference text - json from `analysis.compare` (bootstrap 95%
interval over items, exact McNemar p-value on the items where the formats disagree).
"""

from __future__ import annotations

from pathlib import Path

from debatekit.analysis import compare, load_runs

HERE = Path(__file__).resolve().parent
DATASETS = ("arithmetic", "gsm8k", "strategyqa", "commonsenseqa")


def row(dataset: str) -> str | None:
    folders = [HERE / f"{dataset}-single-{fmt}" for fmt in ("json", "text")]
    if not all((f / "debates.jsonl").exists() for f in folders):
        return None
    tables = load_runs(folders)
    fmt = {r.run_id: Path(r.path).name.rsplit("-", 1)[1] for r in tables.runs.itertuples()}
    debates = tables.debates.assign(answer_format=tables.debates["run_id"].map(fmt))
    c = compare(debates, baseline="json", by="answer_format").iloc[0]
    parse = debates.groupby("answer_format")["parse_failures"].sum()
    n = int(c["pairs"])
    return (f"| {dataset} | {n} | {c['accuracy']:.2f} ({round(c['accuracy'] * n)}/{n}) | "
            f"{c['baseline_accuracy']:.2f} ({round(c['baseline_accuracy'] * n)}/{n}) | "
            f"{c['difference']:+.2f} [{c['low']:+.2f}, {c['high']:+.2f}] | {int(c['only_config'])} / "
            f"{int(c['only_baseline'])}, p = {c['p_mcnemar']:.2g} | {int(parse.get('text', 0))} / "
            f"{int(parse.get('json', 0))} | {c['completion_tokens']:.0f} / {c['baseline_completion_tokens']:.0f} |")


if __name__ == "__main__":
    print("| dataset | items | text | json | text - json [95% CI] | only text right / only json right, McNemar "
          "| parse failures text / json | completion tokens per item text / json |")
    print("|---|---|---|---|---|---|---|---|")
    for name in DATASETS:
        line = row(name)
        if line:
            print(line)
