"""Do the seed protocols' character caps cost quality? Capped against uncapped runs, paired on items.

    python -m benchmarks caps

`dynamics` (decisions, `route=debate`) and `judge_refine` (incidents, `score_with_judge=true`)
were each run twice on the same items, with their schema caps (`<protocol>-capped`) and with
`--set text_caps=false` (`<protocol>-uncapped`); the commands are in this folder's README. For
each pair this prints:

- how often a cap binds: of the capped run's text fields that carry a cap, the share whose text
  is exactly as long as the cap (the grammar stopped it there, usually mid-sentence), and of the
  uncapped run's same fields, the share longer than the cap (what the cap would have cut);
- quality on the items both runs answered (`ok` or `degraded`: a degraded debate still gave an
  answer, which is scored as everywhere else in debatekit): judge_refine's keyword match (`correct`) and the
  grader's 0-1 score against the true root cause; dynamics' recommendation against the option
  the dataset's `reference` names, on the items whose reference names one (`expected_agreement`
  true; the others say that more than one option is defensible), and whether the debate's
  agreement came out as the item expects. Accuracy differences come from `paired.compare`
  (bootstrap interval over items, exact McNemar); the score difference is a paired mean with the
  same bootstrap interval over items (`metrics.bootstrap_ci`);
- completion tokens and wall seconds per item, failures and parse failures.

judge_refine's uncapped run was first scored by a grader whose own `explanation` was uncapped too
(`text_caps=false` lifted it then); `judge_refine-uncapped-regraded` holds the same debates, served
from the response cache, scored by the grader the capped run had. The score row uses it (after
checking that its final hypotheses are the uncapped run's) and prints the first scores beside it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel

from debatekit.analysis import load_runs
from debatekit.analysis.intervals import bootstrap_ci
from debatekit.analysis.paired import compare
from debatekit.protocols import judge_refine
from debatekit.protocols.dynamics import models as dynamics_models
from debatekit.records.schemas import ANSWERED

HERE = Path(__file__).resolve().parent.parent / "results" / "examples" / "caps"  # the committed runs it reads


def reference_letters() -> dict[str, str]:
    """The option a decision item's `reference` recommends, where it recommends one.

    Read from each reference's first sentence (e.g. dec-001 "Take the 12-month bridge ..." is
    option B); items with `expected_agreement` false say more than one option is defensible.
    """
    return {"dec-001": "B", "dec-003": "B", "dec-005": "A", "dec-007": "B", "dec-009": "C",
            "dec-012": "B", "dec-014": "B", "dec-015": "A", "dec-016": "A"}


def caps_of(models: list[type[BaseModel]]) -> dict[str, set[int]]:
    """Field name -> the character caps its strings (or its list's strings) carry in these schemas."""
    caps: dict[str, set[int]] = defaultdict(set)

    def walk(schema: dict) -> None:  # a model's properties; referenced models are walked from `$defs`
        for name, prop in schema.get("properties", {}).items():
            for node in (prop, prop.get("items", {})):
                if node.get("type") == "string" and "maxLength" in node:
                    caps[name].add(node["maxLength"])

    for model in models:
        schema = model.model_json_schema()
        for sub in (schema, *schema.get("$defs", {}).values()):
            walk(sub)
    return caps


PROTOCOL_MODELS = {
    "dynamics": [m for m in vars(dynamics_models).values()
                 if isinstance(m, type) and issubclass(m, BaseModel) and m.__module__ == dynamics_models.__name__],
    "judge_refine": [m for m in vars(judge_refine).values()
                     if isinstance(m, type) and issubclass(m, BaseModel) and m.__module__ == judge_refine.__name__]
    + [judge_refine.hypotheses_model(n) for n in (3, 4, 5)],
}


def texts(output: Any, caps: dict[str, set[int]], key: str | None = None):
    """(field, length, cap) of every capped text in a parsed reply."""
    if isinstance(output, dict):
        for k, v in output.items():
            yield from texts(v, caps, k)
    elif isinstance(output, list):
        for v in output:
            yield from texts(v, caps, key)
    elif isinstance(output, str) and key in caps:
        yield key, len(output), max(caps[key])


def binding(folder: Path, caps: dict[str, set[int]]) -> pd.DataFrame:
    rows = []
    for line in (folder / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        # the grader (phase `score`) measures the protocol and is not part of it
        if isinstance(event.get("output"), dict) and not event.get("cache_hit") and event["phase"] != "score":
            rows += [{"phase": event["phase"], "field": f, "length": n, "cap": cap}
                     for f, n, cap in texts(event["output"], caps)]
    return pd.DataFrame(rows, columns=["phase", "field", "length", "cap"])


def report(protocol: str) -> None:
    capped, uncapped = HERE / f"{protocol}-capped", HERE / f"{protocol}-uncapped"
    if not all((f / "debates.jsonl").exists() for f in (capped, uncapped)):
        return
    folders = {"capped": capped, "uncapped": uncapped}
    debates = pd.concat([load_runs([f]).debates.assign(caps=k) for k, f in folders.items()], ignore_index=True)
    answered = debates["status"].isin(ANSWERED)  # degraded debates are answers too, scored as everywhere
    both = set.intersection(*(set(g.loc[answered[g.index], "item_id"]) for _, g in debates.groupby("caps")))
    failed = ", ".join(f"{k} {int((~answered[g.index]).sum())}" for k, g in debates.groupby("caps"))
    degraded = ", ".join(f"{k} {int((g['status'] == 'degraded').sum())}" for k, g in debates.groupby("caps"))
    print(f"## {protocol}: {len(both)} items both runs answered (no answer: {failed}; degraded: {degraded})\n")

    caps = caps_of(PROTOCOL_MODELS[protocol])
    print("| field | cap | capped: at the cap | uncapped: longer than the cap | uncapped median length |")
    print("|---|---|---|---|---|")
    b_cap, b_free = binding(capped, caps), binding(uncapped, caps)
    for field in sorted(set(b_cap["field"]) | set(b_free["field"])):
        c, f = b_cap[b_cap["field"] == field], b_free[b_free["field"] == field]
        at = int((c["length"] >= c["cap"]).sum())
        over = int((f["length"] > f["cap"]).sum())
        cap = int(max(caps[field]))
        print(f"| {field} | {cap} | {at}/{len(c)} | {over}/{len(f)} | {f['length'].median():.0f} |")
    at, over = int((b_cap["length"] >= b_cap["cap"]).sum()), int((b_free["length"] > b_free["cap"]).sum())
    print(f"| all | | {at}/{len(b_cap)} ({at / max(1, len(b_cap)):.0%}) | "
          f"{over}/{len(b_free)} ({over / max(1, len(b_free)):.0%}) | |\n")

    ok = debates[debates["item_id"].isin(both)].copy()
    if protocol == "dynamics":
        gold = reference_letters()
        out = {(k, r["item_id"]): r["output"] for k, f in folders.items()
               for r in map(json.loads, (f / "debates.jsonl").read_text().splitlines())}
        keys = list(zip(ok["caps"], ok["item_id"]))
        ok["recommendation"] = [out[k].get("recommendation") for k in keys]
        ok["agreement_as_expected"] = [out[k].get("agreement_as_expected") for k in keys]
        graded = ok[ok["item_id"].isin(gold)].assign(correct=lambda t: t["recommendation"] == t["item_id"].map(gold))
        measures = {"recommends the reference's option": graded}
        agree = ok.dropna(subset=["agreement_as_expected"]).assign(correct=lambda t: t["agreement_as_expected"].astype(bool))
        measures["agreement as the item expects"] = agree
    else:
        measures = {"keyword match": ok}
    for name, frame in measures.items():
        if frame["item_id"].nunique() and set(frame["caps"]) == {"capped", "uncapped"}:
            c = compare(frame, baseline="capped", by="caps").iloc[0]
            n = int(c["pairs"])
            print(f"- {name}: uncapped {c['accuracy']:.2f}, capped {c['baseline_accuracy']:.2f} on {n} items; "
                  f"difference {c['difference']:+.2f} [{c['low']:+.2f}, {c['high']:+.2f}], only uncapped right "
                  f"{int(c['only_config'])}, only capped right {int(c['only_baseline'])}, McNemar p = {c['p_mcnemar']:.2g}")
    if protocol == "judge_refine":
        score = ok.pivot(index="item_id", columns="caps", values="score").astype(float)
        regraded = HERE / "judge_refine-uncapped-regraded"
        if (regraded / "debates.jsonl").exists():  # the same debates, scored by the grader the capped run had
            again = load_runs([regraded]).debates.set_index("item_id").reindex(score.index)
            first = ok.pivot(index="item_id", columns="caps", values="final_answer")["uncapped"]
            assert (again["final_answer"] == first).all(), "the regraded run's debates differ from the uncapped run's"
            print(f"- grader score as first run (that grader's explanation uncapped too): uncapped "
                  f"{score['uncapped'].mean():.2f}, capped {score['capped'].mean():.2f}")
            score["uncapped"] = again["score"].astype(float)
            print("- the same debates regraded by the capped run's grader (`judge_refine-uncapped-regraded`):")
        mean, low, high = bootstrap_ci((score["uncapped"] - score["capped"]).dropna().tolist())
        print(f"- grader score (0-1): uncapped {score['uncapped'].mean():.2f}, capped {score['capped'].mean():.2f}; "
              f"paired difference {mean:+.2f} [{low:+.2f}, {high:+.2f}] on {score.dropna().shape[0]} items")
    per = ok.groupby("caps").agg(tokens=("completion_tokens", "mean"), wall=("wall_s", "mean"),
                                 parse=("parse_failures", "sum"), calls=("calls", "mean"))
    for name, r in per.iterrows():
        print(f"- {name}: {r['tokens']:.0f} completion tokens, {r['calls']:.1f} calls, {r['wall']:.0f} s per item; "
              f"{int(r['parse'])} parse failures")
    print()


def main(argv: list[str]) -> int:
    for name in ("dynamics", "judge_refine"):
        report(name)
    return 0
