"""An ipywidgets explorer over one or more runs: a thin layer over `analysis` and `plots`.

    from debatekit.analysis.widgets import Explorer
    Explorer.from_paths(["results/examples"])   # run folders, or sweep folders (each point a run)

Pick a run and an item, step through rounds with the slider: each agent's answer and what
it said (reasoning, critiques, scores: every field of its structured output), the round's
protocol data, the debate's verdict, the round's transcript (what each agent was shown and
replied, `transcript`), and two figures (the item's answers per round, the
run's score trajectory) follow the selection. The state is in traits (`run`, `item`,
`round`), the shown content in `detail.value` and `figures`, so it is testable without a browser.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from debatekit import analysis
from debatekit._base.extras import need
from debatekit.analysis import plots
from debatekit.records import trace, transcript

widgets = need("ipywidgets", "notebooks", "the explorer (debatekit.analysis.widgets)")

HIDDEN_FIELDS = {"answer"}
MAX_TEXT = 600


def expand_paths(paths: Iterable[Path | str]) -> list[Path]:
    """Run folders from run folders and sweep folders (a sweep folder gives the runs one level under
    it, its grid's points first in the grid's order: `trace.run_folders`)."""
    return [run for path in paths for run in trace.run_folders(path)]


class Explorer(widgets.VBox):
    """Run and item pickers, a round slider, the selected round in detail, and figures that follow."""

    def __init__(self, tables: analysis.Tables, labels: dict[str, str] | None = None):
        self.tables = tables
        runs = tables.runs
        labels = labels or {}
        options = [(labels.get(r.run_id) or _run_label(r), r.run_id) for r in runs.itertuples()]
        self.run_picker = widgets.Dropdown(options=options, description="run", layout={"width": "480px"})
        self.item_picker = widgets.Dropdown(description="item", layout={"width": "480px"})
        self.round_slider = widgets.IntSlider(min=1, max=1, value=1, description="round", continuous_update=False)
        self.detail = widgets.HTML()
        self.transcript = widgets.HTML()
        self.item_plot, self.trajectory_plot = widgets.Output(), widgets.Output()
        self.figures: dict[str, Any] = {}
        self._trajectories: dict[str, pd.DataFrame] = {}
        super().__init__([widgets.HBox([self.run_picker, self.item_picker]), self.round_slider, self.detail,
                          widgets.HTML("<b>transcript of this round</b>"), self.transcript,
                          widgets.HBox([self.item_plot, self.trajectory_plot])])
        self.run_picker.observe(self._on_run, "value")
        self.item_picker.observe(self._on_item, "value")
        self.round_slider.observe(lambda _: self.refresh(), "value")
        self._on_run()

    @classmethod
    def from_paths(cls, paths: Iterable[Path | str]) -> "Explorer":
        """An explorer over run folders and/or sweep folders."""
        runs = expand_paths(paths)
        return cls(analysis.load_runs(runs), labels={_run_id(p): p.name for p in runs})

    # --- selection --------------------------------------------------------------------------
    @property
    def debate(self) -> pd.Series | None:
        d = self.tables.debates
        rows = d[(d["run_id"] == self.run_picker.value) & (d["item_id"] == self.item_picker.value)]
        return rows.iloc[0] if len(rows) else None

    def _on_run(self, _=None) -> None:
        d = self.tables.debates
        items = sorted(d[d["run_id"] == self.run_picker.value]["item_id"].tolist())
        self.item_picker.options = items
        if items and self.item_picker.value not in items:
            self.item_picker.value = items[0]
        self._on_item()

    def _on_item(self, _=None) -> None:
        debate = self.debate
        top = int(max(debate["rounds_used"], 1)) if debate is not None else 1
        with self.round_slider.hold_trait_notifications():
            self.round_slider.max = top
            self.round_slider.value = min(self.round_slider.value, top)
        self.refresh()

    # --- content ----------------------------------------------------------------------------
    def refresh(self) -> None:
        """Redraw the detail and the figures for the current selection."""
        debate, r = self.debate, self.round_slider.value
        if debate is None:
            self.detail.value = "<i>no debates in this run</i>"
            return
        rounds = self.tables.rounds
        mine = rounds[rounds["debate_id"] == debate["debate_id"]]
        self.detail.value = self._detail_html(debate, mine[mine["round"] == r], r)
        calls = transcript.entries(self._events(debate["run_id"]), debate["debate_id"])
        self.transcript.value = transcript.as_html([e for e in calls if e.round == r])
        self.figures["item"] = plots.item_answers(mine, truth=_number(debate["truth"]), round_marker=r,
                                                  title=f"{debate['item_id']}: answers per round")
        trajectory = plots.score_trajectory(self._trajectory(debate["run_id"]), title="Run accuracy per round")
        trajectory.add_vline(x=r, line=dict(color="grey", width=8), opacity=0.2)
        self.figures["trajectory"] = trajectory
        for out, fig in ((self.item_plot, self.figures["item"]), (self.trajectory_plot, trajectory)):
            fig.update_layout(width=560, height=400, legend_y=-0.25)
            _draw(out, fig)

    def _trajectory(self, run_id: str) -> pd.DataFrame:
        if run_id not in self._trajectories:
            rows = self.tables.rounds[self.tables.rounds["run_id"] == run_id]
            self._trajectories[run_id] = analysis.score_trajectory(analysis.fill_rounds(rows), n_boot=500)
        return self._trajectories[run_id]

    def _detail_html(self, debate: pd.Series, rows: pd.DataFrame, r: int) -> str:
        turns = self.tables.turns
        said = turns[(turns["debate_id"] == debate["debate_id"]) & (turns["round"] == r)] if not turns.empty else turns
        head = (f"<b>{html.escape(str(debate['item_id']))}</b>, round {r} of {debate['rounds_used']}: "
                f"truth <b>{_esc(debate['truth'])}</b>, final answer <b>{_esc(debate['final_answer'])}</b> "
                f"({'right' if debate['correct'] else 'wrong'}), stop: {_esc(debate['stop_reason'])}")
        body = ["<table class='dk-explorer'><tr><th>agent</th><th>answer</th><th>what it said</th></tr>"]
        for row in rows.itertuples():
            mark = "&#10003;" if row.correct else ("&#10007;" if row.correct is False else "")
            spoken = said[said["agent"] == row.agent] if not said.empty else said
            text = "<br>".join(f"<i>{html.escape(t.phase)}</i>: {_fields(t.output, t.error)}"
                               for t in spoken.itertuples()) or "<i>(no call this round)</i>"
            body.append(f"<tr><td>{html.escape(row.agent)}</td><td>{_esc(row.answer)} {mark}</td><td>{text}</td></tr>")
        body.append("</table>")
        extra = self._round_extra(debate, r)
        verdict = self._verdict(debate)
        return "".join([f"<div>{head}</div>", *body, extra, verdict])

    def _round_extra(self, debate: pd.Series, r: int) -> str:
        """Protocol data recorded for the round (critiques, scores, convergence)."""
        for d in self._records(debate["run_id"]):
            if d.debate_id == debate["debate_id"]:
                extra = next((x.extra for x in d.rounds if x.round == r), {})
                return f"<div><b>round data</b>: {_fields(extra, None)}</div>" if extra else ""
        return ""

    def _verdict(self, debate: pd.Series) -> str:
        """The debate's output (judge verdict, final hypothesis, final answers), as recorded."""
        for d in self._records(debate["run_id"]):
            if d.debate_id == debate["debate_id"] and d.output:
                return f"<div><b>verdict</b>: {_fields(d.output, None)}</div>"
        return ""

    def _records(self, run_id: str):
        return self._folder_data(run_id, "debates")

    def _events(self, run_id: str) -> list[dict]:
        return self._folder_data(run_id, "events")

    def _folder_data(self, run_id: str, what: str):
        from debatekit.records.trace import RunFolder

        cache = self.__dict__.setdefault("_folder_cache", {})
        if (run_id, what) not in cache:
            path = self.tables.runs.set_index("run_id").loc[run_id, "path"]
            cache[(run_id, what)] = getattr(RunFolder(path), what)()
        return cache[(run_id, what)]


def _draw(out: widgets.Output, fig) -> None:
    """Show a figure in an Output widget (only inside IPython; elsewhere `figures` holds it)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    if get_ipython() is None:
        return
    from IPython.display import display

    out.clear_output(wait=True)
    with out:
        display(fig)


def _run_id(path: Path) -> str:
    return json.loads((path / "run.json").read_text(encoding="utf-8"))["run_id"]


def _run_label(r) -> str:
    params = {k[len("param_"):]: v for k, v in r._asdict().items() if k.startswith("param_") and v == v}
    return f"{r.protocol} " + " ".join(f"{k}={v}" for k, v in params.items()) + f" ({r.run_id})"


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _fields(output: Any, error: Any) -> str:
    if isinstance(error, str) and error:
        return f"<span style='color:#b00'>error: {html.escape(error[:MAX_TEXT])}</span>"
    if not isinstance(output, dict):
        return html.escape(str(output)[:MAX_TEXT]) if output is not None else ""
    parts = []
    for key, value in output.items():
        if key in HIDDEN_FIELDS:
            continue
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        parts.append(f"<b>{html.escape(key)}</b>: {html.escape(text[:MAX_TEXT])}")
    return "; ".join(parts)


def review_form(run_dir: Path | str):
    """An ipywidgets form over the run's pending reviews: pick an item, read it, record a verdict.

    Returns a `VBox` whose children are exposed as attributes for scripting and tests:
    `form.item` (Dropdown), `form.details` (HTML), `form.verdict` (ToggleButtons),
    `form.note` (Textarea), `form.reviewer` (Text), `form.submit` (Button), `form.status` (HTML).
    """
    import html

    import ipywidgets as w

    from debatekit import registry
    from debatekit.records.review import VERDICTS, ReviewError, counts, describe, pending, queue, record_verdict, user
    from debatekit.records.trace import RunFolderError

    item = w.Dropdown(description="item")
    details = w.HTML()
    verdict = w.ToggleButtons(options=list(VERDICTS), value=None, description="verdict")
    note = w.Textarea(description="note", placeholder="why")
    reviewer = w.Text(description="reviewer", value=user())
    submit = w.Button(description="Record verdict", button_style="primary")
    status = w.HTML()

    def refresh(selected: str | None = None) -> None:
        entries = pending(run_dir)
        item.options = [(f"{e.item_id} - {e.protocol}", e.item_id) for e in entries]
        ids = [e.item_id for e in entries]
        item.value = selected if selected in ids else (ids[0] if ids else None)
        show()
        c = counts(run_dir)
        status.value = status.value.split("<br>")[0] + (
            f"<br>escalated {c['escalated']}, reviewed {c['reviewed']}, pending {c['review_pending']}")

    def show(*_) -> None:
        entry = next((q for q in queue(run_dir) if q.item_id == item.value), None)
        try:
            details.value = ("<pre>" + html.escape(describe(run_dir, entry, registry.views_of(entry.protocol).review))
                             + "</pre>" if entry else "<i>nothing pending</i>")
        except RunFolderError as exc:
            details.value = html.escape(str(exc))

    def on_submit(_) -> None:
        if item.value is None or verdict.value is None:
            status.value = "choose an item and a verdict"
            return
        try:
            done = record_verdict(run_dir, item.value, verdict.value, note.value, reviewer.value)
        except ReviewError as exc:
            status.value = html.escape(str(exc))
            return
        status.value = f"recorded {done.verdict} for {html.escape(done.item_id)}"
        note.value, verdict.value = "", None
        refresh()

    item.observe(show, names="value")
    submit.on_click(on_submit)
    form = w.VBox([item, details, verdict, note, reviewer, submit, status])
    form.item, form.details, form.verdict, form.note = item, details, verdict, note
    form.reviewer, form.submit, form.status = reviewer, submit, status
    refresh()
    return form
