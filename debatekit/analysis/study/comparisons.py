"""The study's paired comparisons: every configuration against a baseline, the registered primary
comparison alone, Holm's adjustment over the exploratory ones, what each rules out (TOST) and what a
next study would need to detect."""

from __future__ import annotations

import pandas as pd

from debatekit import analysis
from debatekit.analysis import paired as pairing, power
from debatekit.analysis.study.runs import arms


def primary_pairs(tables: analysis.Tables, labels: dict[str, str], registration: dict) -> pd.DataFrame:
    """The items both sides of the registered comparison answered: item_id, and whether `config` and
    `against` got each right (bools), in the order the debates were recorded.

    Raises:
        ValueError: a configuration the study does not have.
    """
    frame = arms(tables, labels)
    config, against = _resolved(registration, frame, tables, labels)
    answered = frame[frame["status"].isin(("ok", "degraded"))]
    sides = {name: answered[answered["config"] == label].drop_duplicates("item_id", keep="last")
             .set_index("item_id")["correct"].eq(True) for name, label in (("config", config), ("against", against))}
    both = sides["config"].index.intersection(sides["against"].index, sort=False)
    return pd.DataFrame({"item_id": list(both), "config": sides["config"].loc[both].to_numpy(),
                         "against": sides["against"].loc[both].to_numpy()})


def paired(tables: analysis.Tables, labels: dict[str, str], baseline: str,
           margin: float = pairing.EQUIVALENCE_MARGIN) -> pd.DataFrame:
    """Every configuration against `baseline` on the items both answered (`paired.compare` rows),
    with the decomposition's vote@1 and debate@t added as configurations when a debate run is there."""
    frame = arms(tables, labels)
    if baseline not in set(frame["config"]):
        return pd.DataFrame(columns=pairing.COLUMNS)
    return pairing.compare(frame, baseline=baseline, by="config", margin=margin)


def rules_out(rows: pd.DataFrame, power_wanted: float = 0.8) -> pd.DataFrame:
    """For each paired comparison, its discordance and the smallest accuracy difference the exact test
    has `power_wanted` to detect at alpha 0.05 at that discordance (`power.detectable_difference`),
    and the items a study needs for 5 points. A planning tool for the next study, from this one's
    discordance as a pilot's: conditioned on the discordance observed, it is no statement of what
    this study ruled out (that is the 90% interval against the margin: `equivalence`)."""
    out = []
    for r in rows.itertuples():
        discordant = r.only_config + r.only_baseline
        rate = discordant / r.pairs if r.pairs else 0.0
        found = power.detectable_difference(int(r.pairs), rate, power_wanted) if rate > 0 else None
        out.append({"config": r.config, "baseline": r.baseline, "pairs": r.pairs, "discordance": rate,
                    "difference": r.difference, "p_mcnemar": r.p_mcnemar, "detectable": found,
                    "items_for_5_points": power.items_needed(0.05, max(rate, 0.05), power_wanted)})
    return pd.DataFrame(out)


def equivalence(rows: pd.DataFrame) -> pd.DataFrame:
    """What each comparison rules out: its 90% interval against the equivalence margin (TOST): `verdict`
    is "equivalent" (the interval lies inside +-margin), "different" (the 95% interval excludes zero)
    or "undecided" (neither: the interval reaches past the margin)."""
    if not len(rows):
        return pd.DataFrame(columns=["config", "baseline", "pairs", "difference", "low90", "high90", "margin",
                                     "p_tost", "verdict"])
    verdict = ["different" if (r.low > 0 or r.high < 0) else "equivalent" if r.p_tost < ALPHA else "undecided"
               for r in rows.itertuples()]
    return rows[["config", "baseline", "pairs", "difference", "low90", "high90", "margin", "p_tost"]].assign(
        verdict=verdict).reset_index(drop=True)


def margin_of(registration: dict | None) -> float:
    """The equivalence margin the study states: its primary comparison's, else `paired.EQUIVALENCE_MARGIN`."""
    return (registration or {}).get("margin") or pairing.EQUIVALENCE_MARGIN


def resolve(name: str, available: list[str], last_rounds: dict[str, int] | None = None) -> str:
    """The report's label for a configuration named in a grid: itself, or `X@t` as the debate run's
    `X debate@t` (its own label `X` when t is its last round, `last_rounds[X]`) and `X@vote` as `X vote@1`.

    Raises:
        ValueError: no such configuration, naming the ones there are.
    """
    base, _, stage = name.partition("@")
    wanted = [name] if not stage else [f"{base} vote@1"] if stage == "vote" else [f"{base} debate@{stage}", base]
    found = next((w for w in wanted if w in available), None)
    if found == base and stage and stage != "vote" and str((last_rounds or {}).get(base)) != stage:
        found = None  # `X@5` of a run whose last round is not 5
    if found is None:
        raise ValueError(f"the study has no configuration {name!r}; it has {', '.join(available)}")
    return found


def _resolved(registration: dict, frame: pd.DataFrame, tables: analysis.Tables, labels: dict[str, str]) -> tuple[str, str]:
    """The report labels of the registered `config` and `against` among the configurations of `arms`;
    `X debate@t` of a run's last round is the run `X` itself (as `distinct` shows it)."""
    last_rounds = _last_rounds(tables, labels)
    shown = [c for c in dict.fromkeys(frame["config"])
             if not (" debate@" in c and str(last_rounds.get(c.split(" debate@")[0])) == c.rsplit("@", 1)[1])]
    return tuple(resolve(registration[k], shown, last_rounds) for k in ("config", "against"))


def _last_rounds(tables: analysis.Tables, labels: dict[str, str]) -> dict[str, int]:
    """Each run's last round, by its label."""
    last = tables.rounds.groupby("run_id")["round"].max() if not tables.rounds.empty else pd.Series(dtype=int)
    return {labels[run]: int(top) for run, top in last.items() if run in labels}


def primary(tables: analysis.Tables, labels: dict[str, str], registration: dict | None) -> pd.DataFrame:
    """The registered comparison alone (a `paired` row, with its 90% interval and TOST at the study's
    margin), empty when the grid registers none.

    Raises:
        ValueError: a configuration the study does not have.
    """
    if not registration:
        return pd.DataFrame(columns=pairing.COLUMNS)
    margin = margin_of(registration)
    config, against = _resolved(registration, arms(tables, labels), tables, labels)
    rows = distinct(paired(tables, labels, against, margin))  # `X@3`, the run's last round, is the run `X`
    return rows[rows["config"] == config].reset_index(drop=True)


def holm(families: dict[str, pd.DataFrame], exclude: tuple[str, str] | None = None) -> dict[str, pd.DataFrame]:
    """Each table with `p_holm`: its McNemar p adjusted by Holm's method (statsmodels) over the family of
    every distinct comparison in all the tables (a pair met twice, either way round, counts once), but
    `exclude` (the registered primary comparison, tested alone: its `p_holm` is NaN)."""
    from statsmodels.stats.multitest import multipletests

    def key(config: str, baseline: str) -> frozenset:
        return frozenset((config, baseline))

    skip = key(*exclude) if exclude else None
    pvalues: dict[frozenset, float] = {}
    for rows in families.values():
        for r in rows.itertuples():
            if key(r.config, r.baseline) != skip and pd.notna(r.p_mcnemar):
                pvalues.setdefault(key(r.config, r.baseline), float(r.p_mcnemar))
    adjusted = dict(zip(pvalues, multipletests(list(pvalues.values()), method="holm")[1])) if pvalues else {}
    return {name: rows.assign(p_holm=[adjusted.get(key(r.config, r.baseline), float("nan"))
                                      for r in rows.itertuples()]) for name, rows in families.items()}


ALPHA = 0.05


def headline(*tables: pd.DataFrame) -> pd.DataFrame:
    """The paired rows the report's headline figure draws: the first of `tables` that has any (against one
    agent, then against the vote), so that a study with no one-agent arm draws its comparison, not an empty plot."""
    return next((t for t in tables if len(t)), tables[-1])


def distinct(rows: pd.DataFrame) -> pd.DataFrame:
    """`paired` rows less a `X debate@t` row that repeats its run's own row `X`: the run's answer is
    its last round's majority, so its debate@<last round> says the same."""
    if not len(rows):
        return rows
    same = ["difference", "low", "high", "pairs", "only_config", "only_baseline", "completion_tokens"]
    keyed = {r.config: tuple(getattr(r, c, None) for c in same) for r in rows.itertuples()}
    repeats = [" debate@" in r.config and keyed.get(r.config.split(" debate@")[0]) == keyed[r.config]
               for r in rows.itertuples()]
    return rows[[not repeat for repeat in repeats]]
