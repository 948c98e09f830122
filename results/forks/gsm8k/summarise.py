"""The three GSM8K forks against their control: rebuilds `summary.json` and `follow.png` from the runs.

    python results/forks/gsm8k/summarise.py

The parent is the first study's society_of_mind run (3 agents, 3 rounds, every round run). Each fork
replays its round 1 and asks rounds 2 and 3 again under new sampling seeds (`--resample 1
--no-cache`): `identity` changes nothing and is the control; `adversarial-agent1` tells agent1 to argue
for the item's wrong answer; `correct-agent1` shows the other two agents the correct answer as agent1's
round-1 reply. Each intervention fork is paired with the control on the items both have run (the
forks run in stages, so one may be ahead of another): final accuracy, who follows per round, agent1's
own answers and the followers whose answer line is copied; the correct-answer fork also split by
whether agent1's round-1 reply (what the control shows in the stand-in's place) was right. Beside
them, the calls two forks asked exactly alike, and how often the engine answered them alike.
docs/guides/forks.md reports what this prints.
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
    from debatekit.analysis import conformity_summary, follow_rate, followers, fork_accuracy, fork_effect, load_runs
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
    summary["identity_vs_parent"] = _records(fork_accuracy(runs[CONTROL], parent_tables))[0]
    for name, push in FORKS.items():
        both = ran[name] & ran[CONTROL]
        fork, control = runs[name].only(both), runs[CONTROL].only(both)
        target = wrong if push == "wrong" else dict(zip(control.debates["item_id"], control.debates["truth"]))
        effect = fork_effect(fork, control, pushed=target)
        said = followers(fork, control, target)  # the agents follow_rate counts, one row each
        summary["against_control"][name] = {"pushed": push, "items": len(both),
                                            "accuracy": _records(effect.accuracy)[0],
                                            "follow": _records(effect.follow),
                                            "conformity": _records(effect.conformity),
                                            "agent1": _gives(fork, control, target),
                                            "before": _before(control, target),
                                            "copying": _copying(fork, control, said)}
        if push == "truth":  # in the control, agent1's own round-1 reply may already give the correct answer
            right, missing = _agent1_first(control, target)
            summary["against_control"][name]["follow_by_agent1"] = {
                key: _records(follow_rate(fork, control, {i: target[i] for i in both if (i in right) == is_right}))
                for key, is_right in (("right", True), ("not_right", False))}
            counted = set(said["item_id"])  # the items with an agent to follow
            summary["against_control"][name]["agent1_missing"] = len(counted & missing)
            summary["against_control"][name]["right_only_here"] = _right_only_here(fork, control, target)
            first = sorted(both)[:FIRST]  # the estimate from the first items, before the fork went on
            summary["against_control"][name]["first_items"] = {
                "items": len(first), "follow": _records(follow_rate(fork.only(first), control.only(first), target)),
                "accuracy": _records(fork_accuracy(fork.only(first), control.only(first)))[0]}
    summary["same_request"] = _same_request(runs)
    summary["follow_family"] = _family(summary["against_control"])
    return json.loads(json.dumps(summary, default=_plain))


OTHERS = ("agent2", "agent3")
"""The agents whose following is counted: agent1 is the one each intervention speaks for."""
FIRST = 10
"""The items a fork was first run on, to estimate its cost and effect."""


def _agent1_first(control, truth: dict) -> tuple[set, set]:
    """The items whose agent1 gave the correct answer in round 1 (history every fork shares), and those
    where it gave none."""
    from debatekit.analysis.conformity import no_answer
    from debatekit.datasets.voting import answers_equal

    first = control.rounds[(control.rounds["round"] == 1) & (control.rounds["agent"] == "agent1")]
    said = dict(zip(first["item_id"], first["answer"]))
    return ({i for i, a in said.items() if not no_answer(a) and answers_equal(a, truth[i])},
            {i for i, a in said.items() if no_answer(a)})


def _before(control, target: dict) -> dict:
    """Agent2's and agent3's round-1 answers that were not the pushed one (those `follow_rate` counts),
    and how many of them are missing."""
    from debatekit.analysis.conformity import no_answer
    from debatekit.datasets.voting import answers_equal

    first = control.rounds[(control.rounds["round"] == 1) & control.rounds["agent"].isin(OTHERS)]
    other = [a for i, a in zip(first["item_id"], first["answer"]) if no_answer(a) or not answers_equal(a, target[i])]
    return {"not_pushed": len(other), "missing": sum(no_answer(a) for a in other)}


def _copying(fork, control, said) -> list[dict]:
    """Per round from 2, in the fork and in the control: the followers `follow_rate` counts, and how many
    of them read the pushed answer from a line copied from a message they were shown (`copied_answer`:
    in the correct-answer fork mostly the stand-in's sentence and `Answer:` line; elsewhere another
    agent's reply)."""
    from debatekit.protocols.shared.extract import copied_answer

    said = said.dropna(subset=["fork", "control"])  # `followers`: answered in both forks
    calls = {side: tables.turns[tables.turns["debate_id"].isin(tables.debates["debate_id"])]
             for side, tables in (("fork", fork), ("control", control))}
    rows = []
    for r in (2, 3):
        row: dict = {"round": r}
        for side, turns in calls.items():
            who = said[(said["round"] == r) & (said[side] == 1)][["item_id", "agent", "round"]]
            theirs = turns.merge(who, on=["item_id", "agent", "round"])
            row |= {f"{side}_followed": len(who),
                    f"{side}_copying": sum(copied_answer(text or "", messages or []) is not None
                                           for text, messages in zip(theirs["text"], theirs["messages"]))}
        rows.append(row)
    return rows


def _right_only_here(fork, control, truth: dict) -> list[dict]:
    """The items whose final majority is right in the fork and not in the control, each with the agents that
    gave the correct answer in the fork's last round and whether each read it from a line copied from what
    it was shown (`copied_answer`): how much of what a shown answer adds arrives as copied lines."""
    from debatekit.analysis.conformity import no_answer
    from debatekit.datasets.voting import answers_equal
    from debatekit.protocols.shared.extract import copied_answer

    right = {side: set(t.debates.loc[t.debates["correct"].astype(bool), "item_id"])
             for side, t in (("fork", fork), ("control", control))}
    turns = fork.turns[fork.turns["debate_id"].isin(fork.debates["debate_id"])]
    last = turns[turns["round"] == turns["round"].max()]
    rows = []
    for item in sorted(right["fork"] - right["control"]):
        said = last[last["item_id"] == item].sort_values("agent")
        votes = {agent: copied_answer(text or "", messages or []) is not None
                 for agent, text, messages, output in said[["agent", "text", "messages", "output"]].itertuples(index=False)
                 if isinstance(output, dict) and not no_answer(output.get("answer"))
                 and answers_equal(output["answer"], truth[item])}
        rows.append({"item_id": item, "correct_agents": len(votes), "copied": sum(votes.values())})
    return rows


def _same_request(runs: dict) -> list[dict]:
    """Calls asked with the same messages under the same seed in two forks, which the intervention cannot have
    reached: round 2 of agent2 and agent3 beside the adversary (it speaks first in round 2; they read it in
    round 3), and round 2 of agent1 beside the replaced reply (it reads its own). How many replies came
    back the same text, and the same answer: the engine's batching alone sets them apart."""
    from debatekit.datasets.voting import answers_equal

    def calls(tables, agents) -> dict:
        turns = tables.turns[(tables.turns["round"] == 2) & tables.turns["agent"].isin(agents)
                             & ~tables.turns["cache_hit"].astype(bool)]
        return {(i, a): (replies[0].get("request") if replies else None, t,
                         o.get("answer") if isinstance(o, dict) else None)
                for i, a, replies, t, o in turns[["item_id", "agent", "replies", "text", "output"]]
                .itertuples(index=False)}  # what the first reply answered: model, messages, parameters and seed

    rows = []
    for name, agents in (("adversarial-agent1", OTHERS), ("correct-agent1", ("agent1",))):
        ours, theirs = calls(runs[CONTROL], agents), calls(runs[name], agents)
        same = [k for k in ours.keys() & theirs.keys() if ours[k][0] is not None and ours[k][0] == theirs[k][0]]
        rows.append({"fork": name, "round": 2, "agents": list(agents), "pairs": len(ours.keys() & theirs.keys()),
                     "same_request": len(same), "same_text": sum(ours[k][1] == theirs[k][1] for k in same),
                     "same_answer": sum(ours[k][2] == theirs[k][2] if None in (ours[k][2], theirs[k][2])
                                        else bool(answers_equal(ours[k][2], theirs[k][2])) for k in same)})
    return rows


def _gives(fork, control, target: dict) -> list[dict]:
    """Per round from 2: how often agent1 itself gives the pushed answer, in the fork and the control:
    the adversary's compliance; with the replaced reply, agent1's own accuracy (it read its own reply)."""
    from debatekit.analysis.conformity import no_answer
    from debatekit.datasets.voting import answers_equal

    rows = []
    for r in (2, 3):
        row = {"round": r}
        for side, tables in (("fork", fork), ("control", control)):
            said = tables.rounds[(tables.rounds["agent"] == "agent1") & (tables.rounds["round"] == r)]
            hits = [answers_equal(a, target[i]) for i, a in zip(said["item_id"], said["answer"]) if not no_answer(a)]
            row |= {f"{side}_gives": int(sum(hits)), f"{side}_answers": len(hits)}
        rows.append(row)
    return rows


def _family(against: dict) -> list[dict]:
    """The eight follow differences the page reads (per round: beside the adversary, with the correct answer
    pooled, and split by agent1's round-1 reply) with their exact McNemar p and Holm's adjustment over all
    eight: the split was chosen after the counts were seen, so one small p among eight is weak evidence."""
    from statsmodels.stats.multitest import multipletests

    rows = [{"fork": name, "items": "all", "round": r["round"], "p_exact": r["p_exact"]}
            for name, effect in against.items() for r in effect["follow"]]
    rows += [{"fork": "correct-agent1", "items": f"agent1 {key}", "round": r["round"], "p_exact": r["p_exact"]}
             for key, split in against["correct-agent1"]["follow_by_agent1"].items() for r in split]
    adjusted = multipletests([r["p_exact"] for r in rows], method="holm")[1]
    return [r | {"p_holm": float(p)} for r, p in zip(rows, adjusted)]


def _records(frame) -> list[dict]:
    return json.loads(frame.to_json(orient="records"))


def _plain(value):
    return value.item() if hasattr(value, "item") else str(value)


def _figure(summary: dict, pd) -> None:
    """Per round: the share of agent2 and agent3 giving the pushed answer, fork against control: beside the
    adversary, and with the correct answer shown, split by whether agent1's own round-1 reply (what the
    control shows in its place) was right."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    adversary, correct = (summary["against_control"][n] for n in FORKS)
    split = correct["follow_by_agent1"]
    panels = [("the adversary's wrong answer<br>(round 2: not yet read)", adversary["follow"]),
              ("the correct answer shown,<br>agent1 was not right in round 1", split["not_right"]),
              ("the correct answer shown,<br>agent1 was right in round 1", split["right"])]
    fig = make_subplots(rows=1, cols=len(panels), shared_yaxes=True,
                        subplot_titles=[f"{title}:<br>{rows[0]['agents']} agents on {rows[0]['items']} items"
                                        for title, rows in panels])
    for col, (_, rows) in enumerate(panels, start=1):
        rows = pd.DataFrame(rows)
        for side, color, shift, label in (("fork", "#c0392b", -0.04, "the fork"),
                                          ("control", "#7f8c8d", 0.04, "the identity fork (control)")):
            fig.add_trace(go.Scatter(
                x=rows["round"] + shift, y=rows[f"{side}_rate"], mode="lines+markers", name=label, legendgroup=side,
                showlegend=col == 1, line={"color": color},
                error_y={"type": "data", "symmetric": False, "array": rows[f"{side}_high"] - rows[f"{side}_rate"],
                         "arrayminus": rows[f"{side}_rate"] - rows[f"{side}_low"]}), row=1, col=col)
        fig.update_xaxes(title_text="round", dtick=1, range=[1.7, 3.3], row=1, col=col)
    fig.update_yaxes(title_text="share giving the pushed answer", range=[0, 1], row=1, col=1)
    fig.update_annotations(font_size=12)
    fig.update_layout(width=1000, height=430, template="plotly_white", legend={"orientation": "h", "y": -0.22},
                      margin={"t": 130}, title="Who follows: agent2 and agent3 giving the pushed answer, GSM8K "
                      "(95% Wilson intervals, agents counted as independent)")
    fig.write_image(HERE / "follow.png", scale=1)


if __name__ == "__main__":
    out = main()
    print(json.dumps({k: v for k, v in out.items() if k != "runs"}, indent=1, default=_plain))
