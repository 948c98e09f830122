import pytest

from debatekit.cli.app import main
from debatekit.models import scripted
from debatekit.records.trace import RunFolder
from tests.conftest import answer


@pytest.mark.parametrize("argv, message", [
    (["run", "nope", "--dataset", "arithmetic"], "unknown protocol 'nope'"),
    (["run", "single", "--dataset", "nope"], "unknown dataset 'nope'"),
    (["run", "single", "--dataset", "arithmetic", "--rounds", "2"], "--rounds does not apply to single"),
    (["run", "single", "--dataset", "arithmetic", "--set", "temperature"], "is not key=value"),
    (["run", "single", "--dataset", "arithmetic", "--set", "colour=red"], "no chosen protocol has parameter 'colour'"),
    (["run", "society_of_mind", "--dataset", "arithmetic", "--set", "agents=many"], "parameter 'agents'"),
    (["run", "society_of_mind", "--dataset", "arithmetic", "--set", "agents=0"], "parameter 'agents'"),
    (["run", "society_of_mind", "--dataset", "arithmetic", "--model", "scripted/schema", "--agents", "4",
      "--set", "agents=[alice, bob]"], "--agents 4 and --set agents=['alice', 'bob'] disagree"),
    (["run", "society_of_mind", "--dataset", "arithmetic", "--model", "scripted/schema", "--rounds", "3",
      "--set", "rounds=2"], "--rounds 3 and --set rounds=2 disagree"),
    (["run", "society_of_mind", "--dataset", "arithmetic", "--model", "scripted/schema", "--agents", "2",
      "--set", "models=[scripted/schema, scripted/schema, scripted/schema]"], "3 models for 2 agents"),
])
def test_bad_input_is_one_clear_line_and_exit_2(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("debatekit: error:") and message in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("argv, ending", [
    (["run", "socety_of_mind", "--dataset", "arithmetic"], "did you mean 'society_of_mind'?"),
    (["run", "society_of_mind", "--dataset", "arithmetic", "--set", "tempreature=0.5"],
     "did you mean 'temperature'?"),
    (["run", "single", "society_of_mind", "--dataset", "arithmetic", "--set", "agnets=2"], "did you mean 'agents'?"),
])
def test_a_mistyped_name_ends_its_one_line_with_the_likely_one(capsys, argv, ending):
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("debatekit: error:") and line.endswith(ending)


def test_a_name_with_no_close_match_gets_no_guess(capsys):
    assert main(["run", "single", "--dataset", "arithmetic", "--set", "colour=red"]) == 2
    assert main(["run", "xyzzy", "--dataset", "arithmetic"]) == 2
    assert "did you mean" not in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["run", "society_of_mind", "--dataset", "arithmetic", "--rounds", "0"], "argument --rounds: must be at least 1"),
    (["run", "society_of_mind", "--dataset", "arithmetic", "--limit", "x"], "argument --limit: 'x' is not a whole"),
    (["run", "society_of_mind"], "the following arguments are required: --dataset"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["run", "single", "--dataset", "arithmetic", "--out", ""], "argument --out: an empty path names no folder"),
    (["fork", "some/run", "--at-round", "2", "--out", " "], "argument --out: an empty path names no folder"),
])
def test_parser_errors_are_one_clear_line_and_exit_2(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and err.startswith("debatekit: error:") and message in err
    assert len(err.splitlines()) == 1


def test_resume_without_out_is_an_error_not_a_new_run(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "single", "--dataset", "arithmetic", "--model", "scripted/schema", "--resume"]) == 2
    assert "--resume needs --out" in capsys.readouterr().err and not (tmp_path / "runs").exists()


def test_rounds_sets_max_rounds_where_a_protocol_has_only_a_ceiling(tmp_path, capsys):
    import json

    out = tmp_path / "dyn"
    assert main(["run", "dynamics", "--dataset", "decisions", "--limit", "1", "--model", "scripted/schema",
                 "--rounds", "2", "--out", str(out), "--quiet"]) == 0
    params = json.loads((out / "run.json").read_text())["config"]["params"]
    assert params == {"max_rounds": 2}


def test_unreadable_dataset_row_names_line_and_field(tmp_path, capsys):
    path = tmp_path / "mine.jsonl"
    path.write_text('{"id": "a", "question": "q"}\n{"id": "b"}\n')
    assert main(["run", "single", "--dataset", str(path)]) == 2
    assert "line 2, field 'question'" in capsys.readouterr().err


def test_run_compares_protocols_and_prints_a_table(tmp_path, arithmetic_file, capsys):
    model = scripted.register("cli-right", fn=lambda req: answer(10))
    code = main(["run", "single", "society_of_mind", "--dataset", str(arithmetic_file), "--model", model,
                 "--agents", "2", "--out", str(tmp_path / "out"), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["protocol", "params", "items"]
    single = next(line for line in lines if line.startswith("single "))
    assert "0.33 [0.00, 1.00]" in single
    assert (tmp_path / "out" / "single" / "run.json").exists()
    assert (tmp_path / "out" / "society_of_mind" / "events.jsonl").exists()
    # resume of a finished run: nothing left to do, same table
    assert main(["run", "single", "--dataset", str(arithmetic_file), "--model", model,
                 "--out", str(tmp_path / "out" / "single"), "--resume", "--quiet"]) == 0


def test_listing_commands(capsys):
    assert main(["protocols"]) == 0 and "society_of_mind" in capsys.readouterr().out
    assert main(["datasets"]) == 0 and "arithmetic" in capsys.readouterr().out
    assert main(["models"]) == 0 and "local/qwen2.5-coder-1.5b-instruct" in capsys.readouterr().out


def test_protocol_score_is_shown_when_there_is_no_ground_truth(tmp_path, capsys):
    from debatekit import registry
    from debatekit.engine import Outcome

    @registry.protocol("test_scored_without_truth")
    def scored():
        async def solve(item, debate):
            debate.record_round(1, {"a": "x"})
            return Outcome(final_answer="x", score=0.5)
        return solve

    path = tmp_path / "d.jsonl"
    path.write_text('{"id": "a", "question": "q"}\n{"id": "b", "question": "r"}\n')
    assert main(["run", "test_scored_without_truth", "--dataset", str(path), "--model", "scripted/schema",
                 "--out", str(tmp_path / "o"), "--quiet"]) == 0
    assert "score 0.50 [0.50, 0.50]" in capsys.readouterr().out


@pytest.mark.parametrize("protocol, dataset, lines", [
    ("patch_debate", "absa_reviews", ["patch_debate: tuples and sentence label by stage", "stage1  3  ", "debate  3  ",
                                      "final   3  "]),
    ("arbitration", "metric_reports", ["arbitration: 8 items, 5 true contradictions, 5 detected",
                                       "detection precision 1.00 (5/5)", "resolution accuracy "]),
])
def test_run_prints_the_protocols_own_scores(tmp_path, capsys, protocol, dataset, lines):
    limit = "3" if protocol == "patch_debate" else "8"
    assert main(["run", protocol, "--dataset", dataset, "--limit", limit, "--model", "scripted/schema",
                 "--out", str(tmp_path / "r"), "--quiet"]) == 0
    out = capsys.readouterr().out
    for line in lines:
        assert line in out


def test_no_per_round_accuracy_table_without_ground_truth(tmp_path, capsys):
    assert main(["run", "cross_critique", "--dataset", "legal_conflicts", "--limit", "1", "--model",
                 "scripted/schema", "--out", str(tmp_path / "r"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "by round" not in out and "nan" not in out and "cross_critique" in out


@pytest.mark.parametrize("busy", [True, False])
def test_ctrl_c_exits_at_once_while_the_local_engine_still_generates(monkeypatch, capsys, busy):
    from debatekit.cli import app as cli
    from debatekit.models.local import engine as local

    def interrupted(args):
        raise KeyboardInterrupt

    def hard_exit(status):
        exits.append(status)
        raise SystemExit(status)

    exits = []
    monkeypatch.setattr(cli, "cmd_run", interrupted)
    monkeypatch.setattr(local, "busy", lambda: busy)
    monkeypatch.setattr(cli.os, "_exit", hard_exit)
    if busy:
        with pytest.raises(SystemExit):
            main(["run", "single", "--dataset", "arithmetic"])
        assert exits == [130]
    else:
        assert main(["run", "single", "--dataset", "arithmetic"]) == 130 and exits == []
    assert "interrupted; finished items are kept" in capsys.readouterr().err


def test_the_local_engine_counts_generations_still_running_on_its_threads(monkeypatch):
    import threading

    from debatekit.models.local import cores
    from debatekit.models.local import engine as local

    engine = local.Engine.__new__(local.Engine)
    engine.in_flight, engine._count, release = 0, threading.Lock(), threading.Event()
    engine.turns = cores.Turns()
    engine._chat = lambda request, cancelled=None: release.wait(5) and {"choices": []}
    monkeypatch.setattr(local, "_engines", {"m": engine})
    worker = threading.Thread(target=engine.chat, args=({},))
    worker.start()
    while not engine.in_flight:
        release.wait(0.01)
    assert local.busy()
    release.set()
    worker.join()
    assert engine.in_flight == 0 and not local.busy()


def test_protocols_is_a_table_of_name_paper_and_one_line(capsys):
    from debatekit import registry

    assert main(["protocols"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "paper", "or", "seed", "what", "it", "does"]
    rows = {line.split()[0]: line for line in lines[2:] if line and not line.startswith(" ")}
    assert set(registry.available()) <= set(rows)
    assert "Du et al. 2023" in rows["society_of_mind"] and "seed 002" in rows["patch_debate"]
    assert all(spec.paper for spec in registry.available().values() if spec.source["kind"] == "builtin")


def test_protocols_name_lists_each_parameter_with_its_default_and_type(capsys):
    assert main(["protocols", "society_of_mind"]) == 0
    out = capsys.readouterr().out
    assert "paper or seed: Du et al. 2023" in out
    rounds = next(line for line in out.splitlines() if line.startswith("rounds "))
    assert rounds.split() == ["rounds", "2", "integer", "1..10", "(set", "by", "--rounds)"]
    assert main(["protocols", "mad"]) == 0 and "--rounds" in capsys.readouterr().out


@pytest.mark.parametrize("name, ceiling", [("society_of_mind", "rounds"), ("cross_critique", "max_rounds"),
                                           ("dynamics", "max_rounds"), ("judged_debate", "rounds")])
def test_rounds_is_the_most_rounds_a_debate_may_run_in_every_protocol(capsys, name, ceiling):
    from debatekit import registry

    assert main(["protocols", name]) == 0
    assert f"--rounds sets {ceiling}: the most rounds a debate may run" in capsys.readouterr().out
    assert registry.get(name).map_flags({}, rounds=2) == {ceiling: 2}


def test_protocols_with_an_unknown_name_is_one_line(capsys):
    assert main(["protocols", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown protocol 'nope'" in err[0]


def test_drain_asks_a_run_folder_or_a_sweep_folder_and_refuses_anything_else(capsys, tmp_path):
    from debatekit._base.signals import DRAIN_FILE

    run_dir, sweep_dir = tmp_path / "run", tmp_path / "sweep"
    run_dir.mkdir(), sweep_dir.mkdir()
    (run_dir / "run.json").write_text("{}")
    (sweep_dir / "sweep.json").write_text("{}")
    assert main(["drain", str(run_dir)]) == 0 and (run_dir / DRAIN_FILE).exists()
    assert "its run starts no new debate" in capsys.readouterr().out
    assert main(["drain", str(sweep_dir)]) == 0 and (sweep_dir / DRAIN_FILE).exists()
    assert "its points start no new debate" in capsys.readouterr().out
    assert main(["drain", str(tmp_path)]) == 2  # neither a run nor a sweep: nothing to ask
    assert "holds no run (run.json) and no sweep (sweep.json)" in capsys.readouterr().err
    assert main(["drain", str(tmp_path / "missing")]) == 2 and not (tmp_path / DRAIN_FILE).exists()
    (run_dir / DRAIN_FILE).unlink()
    (run_dir / "run.json").write_text('{"status": "complete"}')  # nothing runs there: no request is left behind
    assert main(["drain", str(run_dir)]) == 0 and not (run_dir / DRAIN_FILE).exists()
    assert "its run has ended (complete): nothing to drain" in capsys.readouterr().out


def test_a_drained_run_exits_3_with_one_line_saying_how_to_continue(capsys, tmp_path):
    from debatekit._base.signals import DRAIN_FILE

    (tmp_path / DRAIN_FILE).write_text("")  # as if its sweep were draining
    model = scripted.register("drain-cli", fn=lambda req: answer(10))
    assert main(["run", "single", "--dataset", "arithmetic", "--limit", "2", "--model", model, "--no-cache",
                 "--out", str(tmp_path / "r"), "--quiet"]) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("debatekit: drained:") and "--resume" in err and len(err.splitlines()) == 1


def test_protocols_of_one_command_run_together_and_share_identical_calls(tmp_path, arithmetic_file, capsys):
    """`debatekit run single society_of_mind` runs both at once: single's calls are in flight beside
    the debate's round 1, and each of them, identical to agent 1's, reaches the model once."""
    import json

    model = scripted.register("cli-together", fn=lambda req: scripted.Delayed(0.05, answer(10)))
    out = tmp_path / "out"
    assert main(["run", "single", "society_of_mind", "--dataset", str(arithmetic_file), "--model", model,
                 "--agents", "2", "--out", str(out), "--quiet"]) == 0
    items = len(arithmetic_file.read_text().splitlines())
    # the debate's round 1 (all agree: it stops); single's calls waited for agent 1's
    assert len(scripted.get("cli-together").requests) == 2 * items
    events = {name: [json.loads(line) for line in (out / name / "events.jsonl").read_text().splitlines()]
              for name in ("single", "society_of_mind")}
    assert sum(e["cache_hit"] for run in events.values() for e in run) == items
    assert min(e["ts"] for e in events["society_of_mind"]) < max(e["ts"] for e in events["single"])  # overlapping
    table = capsys.readouterr().out.split("\n\n")[0].splitlines()
    assert [line.split()[2] for line in table if line.startswith(("single ", "society_of_mind "))] == [str(items)] * 2


def _run_table(out: str) -> list[str]:
    return out.split("\n\n")[0].splitlines()


def test_the_run_table_fits_100_columns_and_wide_shows_every_column(tmp_path, arithmetic_file, capsys):
    args = ["run", "single", "society_of_mind", "--dataset", str(arithmetic_file), "--model", "scripted/schema",
            "--agents", "3", "--rounds", "2", "--set", "temperature=0.3", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "narrow")]) == 0
    table = _run_table(capsys.readouterr().out)
    assert max(map(len, table)) <= 100, table
    assert table[0].split()[:3] == ["protocol", "params", "items"] and "accuracy [95% CI]" in table[0]
    assert "cached" not in table[0] and "seeds" not in table[0]  # one seed: nothing to say
    assert main([*args, "--out", str(tmp_path / "wide"), "--wide"]) == 0
    table = _run_table(capsys.readouterr().out)
    assert max(map(len, table)) > 100
    for column in ("seeds", "degraded", "cached", "cut off", "looped", "echoes", "escalated"):
        assert column in table[0]
    assert any("temperature=0.3" in line and "rounds=2" in line for line in table[2:])  # parameters uncut


def test_a_narrow_run_table_names_the_left_out_columns_that_are_not_zero():
    from debatekit.analysis.paired import aligned
    from debatekit.cli.tables import _narrow

    head = ("protocol", "params", "items", "seeds", "failed", "degraded", "accuracy [95% CI]", "rounds", "calls",
            "tokens", "cached", "cut off", "unread: cut off", "looped", "other", "echoes", "escalated", "wall s")
    row = ("single", "p=" + "x" * 200, "3", "2", "0", "1", "0.50 [0.00, 1.00]", "1.0", "6", "900", "4", "?", "0",
           "2", "0", "0", "0", "7")
    rows, note = _narrow([head, row])
    assert rows[0] == ("protocol", "params", "items", "seeds", "failed", "accuracy [95% CI]", "rounds", "calls",
                       "tokens", "wall s")
    assert rows[1][1].endswith("…") and max(map(len, aligned(rows))) == 100
    assert note == "(not all zero in columns left out: degraded, looped; --wide shows them)\n"


def test_a_flag_and_set_that_agree_are_one_setting(tmp_path, capsys):
    assert main(["run", "society_of_mind", "--dataset", "arithmetic", "--limit", "1", "--model", "scripted/schema",
                 "--rounds", "2", "--set", "rounds=2", "--out", str(tmp_path / "r"), "--quiet"]) == 0


def test_run_of_several_protocols_refuses_a_used_folder_before_any_starts(tmp_path, capsys, model_from):
    """`run A B --out D` where D/B holds a run: refused at once, not after A has run."""
    asked = []
    model = model_from(lambda req: asked.append(req) or answer(1))
    assert main(["run", "society_of_mind", "--dataset", "arithmetic", "--limit", "1", "--model", model,
                 "--out", str(tmp_path / "d" / "society_of_mind"), "--quiet"]) == 0
    asked.clear()
    capsys.readouterr()
    assert main(["run", "single", "society_of_mind", "--dataset", "arithmetic", "--limit", "1", "--model", model,
                 "--out", str(tmp_path / "d")]) == 2
    assert "society_of_mind already holds a run" in capsys.readouterr().err
    assert asked == [] and not (tmp_path / "d" / "single").exists()


def test_a_resume_that_grows_the_run_says_so(tmp_path, capsys):
    args = ["run", "single", "--dataset", "arithmetic", "--model", "scripted/schema", "--out", str(tmp_path / "r"),
            "--quiet"]
    assert main(args + ["--limit", "2"]) == 0
    capsys.readouterr()
    assert main(args + ["--limit", "2", "--resume"]) == 0
    assert "this resume goes on" not in capsys.readouterr().err
    assert main(args + ["--limit", "3", "--resume"]) == 0
    assert "was limited to the first 2 items; this resume goes on to the first 3 items" in capsys.readouterr().err
    assert main(args + ["--resume"]) == 0
    assert "was limited to the first 3 items; this resume goes on to every item of the dataset" in capsys.readouterr().err


def test_a_limit_above_the_dataset_size_says_all_items_run(tmp_path, capsys):
    """--limit 500 on a smaller dataset runs every item; one line says so rather than pass the number unsaid."""
    args = ["run", "single", "--dataset", "arithmetic", "--model", "scripted/schema", "--quiet"]
    assert main(args + ["--limit", "500", "--out", str(tmp_path / "r")]) == 0
    size = len(RunFolder(tmp_path / "r").debates())
    assert f"the limit of 500 items is more than arithmetic's {size}; all {size} run" in capsys.readouterr().err
    assert main(args + ["--limit", str(size), "--out", str(tmp_path / "s")]) == 0
    assert "the limit of" not in capsys.readouterr().err


def test_out_expands_a_tilde_the_shell_left(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert main(["run", "single", "--dataset", "arithmetic", "--limit", "1", "--model", "scripted/schema",
                 "--out", "~/runs/x", "--quiet"]) == 0
    assert (tmp_path / "runs" / "x" / "run.json").exists() and not (tmp_path / "~").exists()


def test_protocols_name_says_which_ends_of_a_range_are_excluded(capsys):
    """arbitration refuses threshold=1: its range must not read as if 1 were allowed."""
    assert main(["protocols", "arbitration"]) == 0
    out = capsys.readouterr().out
    assert "number 0..1 (0 and 1 excluded)" in out
    assert main(["protocols", "society_of_mind"]) == 0
    assert "excluded" not in next(line for line in capsys.readouterr().out.splitlines() if line.startswith("agents"))
