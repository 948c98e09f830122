"""Registered sequential studies: boundaries against published tables, decisions, error rates by
simulation, the plan in a grid, its registration, and whole studies on a scripted model that stop
at the first look, or do not."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from debatekit.analysis import sequential
from debatekit.cli import app as cli
from debatekit.models import scripted
from debatekit.sweep import plan as planning
from debatekit.sweep.execute import EXECUTORS
from debatekit.sweep.grid import SweepError, expand_grid, study_plan
from tests.sweep_helpers import InProcess

# Lan-DeMets O'Brien-Fleming-type boundaries, two-sided alpha 0.05, equally spaced looks: the values
# R's gsDesign gives (gsDesign(k, test.type = 2, sfu = sfLDOF)$upper$bound), as printed in its tables
PUBLISHED = {2: [2.9626, 1.9686], 3: [3.7103, 2.5114, 1.9930], 4: [4.3326, 2.9631, 2.3590, 2.0141]}


@pytest.mark.parametrize("k", sorted(PUBLISHED))
def test_efficacy_boundaries_match_the_published_tables(k):
    design = sequential.Design(looks=tuple(range(40, 40 * k + 1, 40)))
    assert design.efficacy() == pytest.approx(PUBLISHED[k], abs=2e-3)


def test_a_one_sided_boundary_at_alpha_is_a_two_sided_one_at_twice_alpha():
    looks = (50, 100, 150)
    one = sequential.Design(looks=looks, alpha=0.05).equivalence()
    two = sequential.Design(looks=looks, alpha=0.10).efficacy()
    assert one == pytest.approx(two, abs=2e-3)
    assert sequential.spent(1.0, 0.05) == pytest.approx(0.05) and sequential.spent(0.5, 0.05) < 0.01


def test_decisions_at_a_look():
    design = sequential.Design(looks=(50, 100, 150))
    assert sequential.decide(design, 1, 20, 2, 50).decision == "different"  # 18 of 22 discordant one way
    assert sequential.decide(design, 1, 12, 3, 50).decision == "continue"
    assert sequential.decide(design, 3, 10, 10, 150).decision == "equivalent"  # d = 0, tight
    assert sequential.decide(design, 3, 30, 20, 150).decision == "undecided"  # the last look: no third way
    last = sequential.decide(design, 3, 10, 10, 150)
    d, z, low, high = sequential.statistics(10, 10, 150, 0.10)
    # by hand: d 0, per-item variance 20/150 * 150/149, se = sqrt(that / 150); TOST one item nearer its null
    se = math.sqrt(20 / 150 * 150 / 149 / 150)
    assert (float(d), float(z)) == (0.0, 0.0) and float(low) == pytest.approx((0.10 - 1 / 150) / se)
    assert last.equivalence_boundary == pytest.approx(sequential.at_look(design.equivalence()[2], 150))


def test_the_repeated_interval_widens_the_difference_by_the_looks_boundary():
    design = sequential.Design(looks=(50, 100, 150))
    # the replication's second look: 4 items only the debate got right, 17 only the vote, of 100
    look = sequential.decide(design, look=2, only_config=4, only_baseline=17, pairs=100)
    se = math.sqrt((0.21 - 0.13 ** 2) * 100 / 99 / 100)  # 0.0442
    low, high = look.repeated_interval()
    assert (low + high) / 2 == pytest.approx(-0.13) and high - low == pytest.approx(2 * look.efficacy_boundary * se)
    assert (round(low, 3), round(high, 3)) == (-0.243, -0.017)
    first = sequential.decide(design, look=1, only_config=4, only_baseline=17, pairs=100)  # same table, earlier look
    assert first.repeated_interval()[0] < low and first.repeated_interval()[1] > high  # a stricter boundary: wider
    assert sequential.decide(design, 1, 0, 0, 50).repeated_interval() == (0.0, 0.0)  # no discordant item: no spread


def test_the_recorded_looks_carry_their_repeated_intervals():
    from pathlib import Path

    replication = Path(__file__).resolve().parents[2] / "results" / "studies" / "replication"
    looks = planning.read_looks(replication)
    assert [entry["decision"] for entry in looks] == ["continue", "different"]
    assert (round(looks[1]["rci_low"], 3), round(looks[1]["rci_high"], 3)) == (-0.243, -0.017)
    assert looks[0]["rci_low"] < -0.12 < looks[0]["rci_high"] and looks[0]["rci_high"] > 0  # look 1 went on
    assert planning.read_looks(replication / "no-such-study") == []


def test_the_error_rates_stay_at_or_below_alpha_by_simulation():
    design = sequential.Design(looks=(50, 100, 150))
    sims, slack = 6000, 3 * math.sqrt(0.05 * 0.95 / 6000)
    assert sequential.simulate(design, 0.0, 0.2, sims)["different"] <= 0.05 + slack
    assert sequential.simulate(design, 0.10, 0.2, sims)["equivalent"] <= 0.05 + slack
    assert sequential.simulate(design, -0.10, 0.3, sims)["equivalent"] <= 0.05 + slack
    power = sequential.simulate(design, 0.15, 0.25, sims)
    assert power["different"] > 0.9 and power["expected_items"] < 130  # a large difference stops early


def test_the_committed_simulation_ships_only_designs_that_keep_alpha():
    from pathlib import Path

    data = json.loads((Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "sequential.json").read_text())
    assert data["designs"] and all({"alpha", "type_i_error", "power", "n_sims", "shipped"} <= set(d) for d in data["designs"])
    for d in data["designs"]:
        slack = 2 * math.sqrt(d["alpha"] * (1 - d["alpha"]) / d["n_sims"])
        worst = max(d["type_i_error"]["efficacy"], d["type_i_error"]["equivalence"])
        assert d["shipped"] == (worst <= d["alpha"] + slack)


# --- the plan in a grid, and its registration ----------------------------------------------------------

PLAN = {"primary": {"config": "self_consistency", "against": "single"}, "looks": [20, 40], "margin": 0.1}


def test_a_plan_is_checked_and_sets_every_points_limit():
    grid = {"parameters": {"dataset": "arithmetic"}, "points": [{"protocol": "single"}], "plan": PLAN}
    plan = study_plan(grid)
    assert plan["max_items"] == 40 and plan["alpha"] == 0.05 and plan["stopping"] == "lan-demets-obrien-fleming"
    assert [p.parameters["limit"] for p in expand_grid(grid)] == [40]
    for bad, why in (({**PLAN, "looks": [40, 20]}, "increasing"), ({**PLAN, "max_items": 50}, "last look"),
                     ({**PLAN, "stopping": "pocock"}, "stopping"), ({**PLAN, "alpha": 0.7}, "alpha"),
                     ({k: v for k, v in PLAN.items() if k != "looks"}, "looks")):
        with pytest.raises(SweepError, match=why):
            expand_grid({**grid, "plan": bad})
    with pytest.raises(SweepError, match="limit 10 is not the plan's max_items 40"):
        expand_grid({**grid, "parameters": {"dataset": "arithmetic", "limit": 10}})
    with pytest.raises(SweepError, match="different comparisons"):
        expand_grid({**grid, "primary": {"config": "mad", "against": "single"}})


def _grid(folder, plan=PLAN):
    folder.mkdir(parents=True, exist_ok=True)
    grid = folder / "grid.yaml"
    grid.write_text(yaml.safe_dump({"parameters": {"dataset": "arithmetic", "model": "scripted/planned"},
                                    "points": [{"protocol": "single", "answer_format": "json"},
                                               {"protocol": "self_consistency", "samples": 1, "answer_format": "json"}],
                                    "plan": plan}))
    return grid


def test_registration_is_once_before_anything_runs_and_a_later_edit_is_a_deviation(tmp_path):
    grid = _grid(tmp_path / "study")
    record = planning.register(grid)
    assert record["plan"] == study_plan(yaml.safe_load(grid.read_text())) and len(record["plan_sha256"]) == 64
    assert json.loads((grid.parent / "registration.json").read_text())["plan_sha256"] == record["plan_sha256"]
    with pytest.raises(SweepError, match="registered already"):
        planning.register(grid)
    assert planning.deviations(grid) == []
    _grid(tmp_path / "study", {**PLAN, "looks": [20, 30]})
    assert planning.deviations(grid) == ["looks: registered [20, 40], now [20, 30]",
                                         "max_items: registered 40, now 30"]
    other = _grid(tmp_path / "ran")
    (other.parent / "single-x").mkdir()
    (other.parent / "single-x" / "run.json").write_text("{}")
    with pytest.raises(SweepError, match="have run already"):
        planning.register(other)


def _model(single_right, sample_right):
    """The scripted model the grids name: one agent (`single`) and the samples right on the items
    (by index) the two functions say."""
    from debatekit import datasets

    items, _ = datasets.load("arithmetic")
    truths = {item.id: item.answer for item in items}

    def reply(req):
        index = int(req.item_id.split("-")[1])
        right = (sample_right if req.agent.startswith("sample") else single_right)(index)
        return {"reasoning": "r", "answer": truths[req.item_id] + (0 if right else 1)}

    scripted.register("planned", fn=reply)


@pytest.fixture
def points_here(monkeypatch):
    """Run each point's notebook as its cells would, in this process (where the scripted model of the
    test is registered); the study notebook still runs in its kernel."""
    import nbformat
    import papermill

    from debatekit import sweep

    real = papermill.execute_notebook

    def execute(notebook, output, parameters=None, **kwargs):
        if not str(notebook).endswith("run_debate.ipynb"):
            return real(notebook, output, parameters=parameters, **kwargs)
        result = sweep.run_point(parameters["config"], parameters["out_dir"], progress=False)
        sweep.record_point(parameters["summary_path"], result)
        nbformat.write(nbformat.v4.new_notebook(), output)

    monkeypatch.setattr(papermill, "execute_notebook", execute)
    monkeypatch.setitem(EXECUTORS, "local", lambda workers: InProcess())


def _items(folder):
    return {p.parent.name.split("-")[0]: len(p.read_text().splitlines()) for p in folder.glob("*/debates.jsonl")}


def test_a_study_that_is_decided_at_its_first_look_stops_there(tmp_path, capsys, points_here):
    _model(single_right=lambda i: False, sample_right=lambda i: True)  # the vote right, one agent wrong: decided
    grid = _grid(tmp_path / "study")
    planning.register(grid)
    assert cli.main(["study", str(grid), "--quiet"]) == 0
    assert _items(grid.parent) == {"single": 20, "self_consistency": 20}  # the second look never ran
    looks = json.loads((grid.parent / "looks.json").read_text())
    assert [(entry["look"], entry["pairs"], entry["decision"]) for entry in looks] == [(1, 20, "different")]
    assert "look 1 of 2 (20 items)" in capsys.readouterr().out
    page = (grid.parent / "report.html").read_text()
    assert "The plan and its looks" in page and "deviations from the registered plan: none" in page


def test_a_study_that_is_not_decided_runs_every_look_and_reports_an_edited_plan(tmp_path, capsys, points_here):
    # each right on half the items, never the same ones: no difference, too noisy for equivalence
    _model(single_right=lambda i: i % 2 == 0, sample_right=lambda i: i % 2 == 1)
    grid = _grid(tmp_path / "study")
    planning.register(grid)
    grid.write_text(grid.read_text().replace("margin: 0.1", "margin: 0.12"))  # edited after registration
    assert cli.main(["study", str(grid), "--quiet"]) == 0
    assert _items(grid.parent) == {"single": 40, "self_consistency": 40}
    looks = json.loads((grid.parent / "looks.json").read_text())
    assert [(entry["look"], entry["decision"]) for entry in looks] == [(1, "continue"), (2, "undecided")]
    assert "the plan deviates from its registration: margin: registered 0.1, now 0.12" in capsys.readouterr().err
    assert "margin: registered 0.1, now 0.12" in (grid.parent / "report.html").read_text()


def test_an_estimate_runs_items_outside_the_sample_and_keeps_nothing(tmp_path, capsys):
    _model(single_right=lambda i: True, sample_right=lambda i: True)
    grid = _grid(tmp_path / "study")
    asked = []
    scripted.register("planned-counted", fn=lambda req: asked.append(req.item_id) or {"reasoning": "r", "answer": 0})
    grid.write_text(grid.read_text().replace("scripted/planned", "scripted/planned-counted"))
    assert cli.main(["study", str(grid), "--estimate", "--quiet"]) == 0
    out = capsys.readouterr().out
    # 10 items after the plan's 40 (arith-040 .. arith-049), each configuration; nothing left behind
    assert sorted(set(asked)) == [f"arith-{i:03d}" for i in range(40, 50)] and len(asked) == 20
    assert sorted(p.name for p in grid.parent.iterdir()) == ["grid.yaml"]
    table = planning.estimate(grid)
    assert list(table["look_items"].unique()) == [20, 40] and set(table["configuration"]) >= {"all"}
    tokens = table.set_index(["configuration", "look_items"])["completion_tokens"]
    configs = [c for c in table["configuration"].unique() if c != "all"]
    assert tokens["all", 40] == pytest.approx(sum(tokens[c, 40] for c in configs)) and tokens["all", 40] > 0
    assert tokens["all", 40] == pytest.approx(2 * tokens["all", 20])  # projected at the rate measured
    assert "projected from 10 items per configuration" in out and "all" in out
    small = tmp_path / "small"
    _grid(small, {**PLAN, "looks": [50, 95]})
    with pytest.raises(SweepError, match="5 past the study's 95; 10 are needed"):
        planning.estimate(small / "grid.yaml")


def test_an_estimate_of_a_vote_that_reuses_a_debate_runs_the_debate_first(tmp_path):
    asked = []
    scripted.register("planned-shared", fn=lambda req: asked.append(req.agent) or {"reasoning": "r", "answer": 1})
    folder = tmp_path / "shared"
    folder.mkdir()
    grid = folder / "grid.yaml"
    grid.write_text(yaml.safe_dump({
        "parameters": {"dataset": "arithmetic", "model": "scripted/planned-shared", "answer_format": "json"},
        "points": [{"protocol": "society_of_mind", "agents": 3, "rounds": 1},
                   {"protocol": "self_consistency", "samples": 5, "reuse": "society_of_mind"}],
        "plan": {**PLAN, "primary": {"config": "society_of_mind@1", "against": "self_consistency"}}}))
    table = planning.estimate(grid)
    # the debate's 3 agents on 10 items, then only the vote's 2 fresh samples on each
    assert sorted(set(asked)) == ["agent1", "agent2", "agent3", "sample4", "sample5"] and len(asked) == 50
    assert set(table["configuration"]) >= {"all"}


def test_a_study_runs_on_the_readers_model_in_a_folder_of_its_own(tmp_path, capsys, points_here):
    """`debatekit study GRID --model M --out DIR` runs the committed design on M: the grid is
    untouched, DIR gets the grid it ran (with where it came from) and every run.json names M."""
    _model(single_right=lambda i: False, sample_right=lambda i: True)
    scripted.register("readers", fn=scripted.get("planned")._fn)
    grid = _grid(tmp_path / "study")
    before = grid.read_text()
    mine = tmp_path / "mine"
    assert cli.main(["study", str(grid), "--model", "scripted/readers", "--set", "samples=3",
                     "--out", str(mine), "--quiet"]) == 0
    assert grid.read_text() == before and not list(grid.parent.glob("*/run.json"))
    assert (mine / "grid.yaml").read_text().startswith(f"# the design of {grid} with --model scripted/readers --set samples=3")
    configs = {p.parent.name.split("-")[0]: json.loads(p.read_text())["config"] for p in mine.glob("*/run.json")}
    assert {name: c["model"] for name, c in configs.items()} == {"single": "scripted/readers",
                                                                "self_consistency": "scripted/readers"}
    assert configs["self_consistency"]["params"]["samples"] == 3 and "samples" not in configs["single"]["params"]
    assert not scripted.get("planned").requests and scripted.get("readers").requests
    assert (mine / "report.html").exists()


@pytest.mark.parametrize("argv, message", [
    (["--model", "scripted/x"], "give --out, a folder other than"),
    (["--api-base", "http://x", "--out", "elsewhere"], "--api-base and --api-key-env go with --model"),
    (["--set", "colour=red", "--out", "elsewhere"], "no point's protocol has parameter 'colour'"),
])
def test_a_retargeted_study_refuses_what_it_cannot_do_in_one_line(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    grid = _grid(tmp_path / "study")
    assert cli.main(["study", str(grid), *argv, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "elsewhere" / "grid.yaml").exists()


def test_a_study_run_again_with_nothing_to_do_changes_no_file(tmp_path, points_here):
    _model(single_right=lambda i: False, sample_right=lambda i: True)
    grid = _grid(tmp_path / "study")
    assert cli.main(["study", str(grid), "--quiet"]) == 0
    written = {name: (grid.parent / name).read_bytes() for name in ("sweep.json", "study.ipynb", "report.html")}
    assert cli.main(["study", str(grid), "--quiet"]) == 0
    assert {name: (grid.parent / name).read_bytes() for name in written} == written
    assert not list(grid.parent.glob(".study*"))
    # a change the report shows is written
    (grid.parent / "looks.json").unlink()
    assert cli.main(["study", str(grid), "--report-only", "--quiet"]) == 0
    assert (grid.parent / "study.ipynb").read_bytes() != written["study.ipynb"]
