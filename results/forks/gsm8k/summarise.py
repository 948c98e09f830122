"""The three GSM8K forks against their control: rebuilds `summary.json` and `follow.png` from the runs.

    python results/forks/gsm8k/summarise.py

The parent is the first study's society_of_mind run (3 agents, 3 rounds, every round run). Each fork
replays its round 1 and asks rounds 2 and 3 again under new sampling seeds (`--resample 1
--no-cache`): `identity` changes nothing and is the control; `adversarial-agent1` tells agent1 to argue
for the item's wrong answer; `correct-agent1` shows the other two agents the correct answer as agent1's
round-1 reply. Each intervention fork is paired with the control on the items both have run (the
forks run in stages, so one may be ahead of another). docs/guides/forks.md reports what this prints.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
PARENT = ROOT / "results/studies/gsm8k/society_of_mind-agents3-rounds3-stop_on_agreementfalse-3ea484a1"
CONTROL = "identity"
FORKS = {"adversarial-agent1": "wrong", "correct-agent1": "truth"}
"""Each intervention fork and the answer it pushes: the item's wrong answer, or the correct one."""


def main() -> dict:
    """Write `summary.json` and `follow.png` beside this file."""
    import pandas as pd

    summary = summarise()
    (HERE / "summary.json").write_text(json.dumps(summary, indent=1, default=_plain) + "\n", encoding="utf-8")
    _figure(summary, pd)
    return summary


def summarise() -> dict:
    """Each fork on the items it has run; each intervention fork against the control on the items both have."""
    sys.path.insert(0, str(ROOT))
    from debatekit.analysis import conformity_summary, fork_effect, load_runs
    from debatekit.records.schemas import ANSWERED
    from debatekit.records.trace import RunFolder
    from debatekit.sweep.forks import wrong_answer

    runs = {name: load_runs([HERE / name]) for name in [CONTROL, *FORKS]}
    ran = {name: set(t.debates["item_id"]) for name, t in runs.items()}
    parent = {d.item_id: d for d in RunFolder(PARENT).debates()}
    wrong = {i: wrong_answer(SimpleNamespace(answer=parent[i].truth), parent[i]) for i in set.union(*ran.values())}
    summary: dict = {"items": len(set.intersection(*ran.values())), "parent": PARENT.relative_to(ROOT).as_posix(),
                     "wrong_answers": dict(sorted(wrong.items())), "runs": {}, "against_control": {}}
    for name, tables in runs.items():
        d = tables.debates[tables.debates["status"].isin(ANSWERED)]
        summary["runs"][name] = {"debates": len(tables.debates), "answered": len(d),
                                 "accuracy": float(d["correct"].astype(bool).mean()),
                                 "conformity": _records(conformity_summary(tables.rounds, by=()))}
    parent_tables = load_runs([PARENT]).only(ran[CONTROL])
    summary["identity_vs_parent"] = _records(fork_effect(runs[CONTROL], parent_tables).accuracy)[0]
    for name, push in FORKS.items():
        both = ran[name] & ran[CONTROL]
        fork, control = runs[name].only(both), runs[CONTROL].only(both)
        pushed = wrong if push == "wrong" else "truth"
        effect = fork_effect(fork, control, pushed=pushed)
        summary["against_control"][name] = {"pushed": push, "items": len(both),
                                            "accuracy": _records(effect.accuracy)[0],
                                            "follow": _records(effect.follow),
                                            "agent1": _gives(fork, control, wrong if push == "wrong" else None)}
        if push == "truth":  # the stand-in is a text of its own: how many followers repeat it word for word
            summary["against_control"][name]["copying"] = _copying(fork)
    return json.loads(json.dumps(summary, default=_plain))


def _gives(fork, control, wrong: dict | None) -> list[dict]:
    """Per round from 2: how often agent1 itself gives the pushed answer, in the fork and the control:
    the adversary's compliance; with the replaced reply, agent1's own accuracy (it read its own reply)."""
    from debatekit.datasets.voting import answers_equal

    targets = {side: wrong if wrong is not None else dict(zip(t.debates["item_id"], t.debates["truth"]))
               for side, t in (("fork", fork), ("control", control))}
    rows = []
    for r in (2, 3):
        row = {"round": r}
        for side, tables in (("fork", fork), ("control", control)):
            said = tables.rounds[(tables.rounds["agent"] == "agent1") & (tables.rounds["round"] == r)]
            hits = [answers_equal(a, targets[side][i]) for i, a in zip(said["item_id"], said["answer"])
                    if a is not None]
            row |= {f"{side}_gives": int(sum(hits)), f"{side}_answers": len(hits)}
        rows.append(row)
    return rows


def _copying(fork) -> list[dict]:
    """Per round from 2: agent2's and agent3's replies that give the correct answer where their own round-1
    answer was wrong (the followers `follow_rate` counts), and how many of them repeat the stand-in's
    sentence word for word: an answer read from a copy of the reply they were shown."""
    from debatekit.datasets.voting import answers_equal
    from debatekit.sweep.forks.builtin import STAND_IN

    sentence = STAND_IN.split("{answer}")[0]
    truth = dict(zip(fork.debates["item_id"], fork.debates["truth"]))
    rounds = fork.rounds
    first = {(i, a): x for i, a, x in rounds[rounds["round"] == 1][["item_id", "agent", "answer"]].itertuples(index=False)}
    calls = fork.turns[fork.turns["debate_id"].isin(fork.debates["debate_id"]) & fork.turns["agent"].isin(["agent2", "agent3"])]
    rows = []
    for r in (2, 3):
        followers = [text for i, a, output, text in calls[calls["round"] == r][["item_id", "agent", "output", "text"]]
                     .itertuples(index=False)
                     if first.get((i, a)) is not None and not answers_equal(first[i, a], truth[i])
                     and isinstance(output, dict) and answers_equal(output.get("answer"), truth[i])]
        rows.append({"round": r, "followed": len(followers), "copying": sum(sentence in (t or "") for t in followers)})
    return rows


def _records(frame) -> list[dict]:
    return json.loads(frame.to_json(orient="records"))


def _plain(value):
    return value.item() if hasattr(value, "item") else str(value)


def _figure(summary: dict, pd) -> None:
    """Per fork and round: the share of the other two agents giving the pushed answer, fork against control."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    names = list(summary["against_control"])
    fig = make_subplots(rows=1, cols=len(names), shared_yaxes=True,
                        subplot_titles=[f"{n}: the {'wrong' if FORKS[n] == 'wrong' else 'correct'} answer, "
                                        f"{summary['against_control'][n]['items']} items" for n in names])
    for col, name in enumerate(names, start=1):
        rows = pd.DataFrame(summary["against_control"][name]["follow"])
        for side, color, shift, label in (("fork", "#c0392b", -0.04, "the fork"),
                                          ("control", "#7f8c8d", 0.04, "the identity fork (control)")):
            fig.add_trace(go.Scatter(
                x=rows["round"] + shift, y=rows[f"{side}_rate"], mode="lines+markers", name=label, legendgroup=side,
                showlegend=col == 1, line={"color": color},
                error_y={"type": "data", "symmetric": False, "array": rows[f"{side}_high"] - rows[f"{side}_rate"],
                         "arrayminus": rows[f"{side}_rate"] - rows[f"{side}_low"]}), row=1, col=col)
        fig.update_xaxes(title_text="round", dtick=1, row=1, col=col)
    fig.update_yaxes(title_text="share giving the pushed answer", range=[0, 1], row=1, col=1)
    fig.update_layout(width=900, height=400, template="plotly_white", legend={"orientation": "h", "y": -0.25},
                      title="Who follows: the two other agents giving the pushed answer, GSM8K, 95% Wilson intervals")
    fig.write_image(HERE / "follow.png", scale=1)


if __name__ == "__main__":
    out = main()
    print(json.dumps({k: v for k, v in out.items() if k != "runs"}, indent=1, default=_plain))
