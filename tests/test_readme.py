"""The README opens with the two commands, and CI runs exactly the README's test command."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_readme_opens_with_two_commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert lines[0] == "# debatekit" and lines[2] == "```bash"
    main_job, tests = readme_commands()
    assert "debatekit run" in main_job and "--model" not in main_job
    assert "pytest" in tests


def test_the_first_command_keeps_its_runs_in_a_folder_and_says_how_to_resume_them():
    import shlex

    from debatekit.cli.app import build_parser

    main_job = readme_commands()[0]
    run = shlex.split(main_job.split("&& .venv/bin/debatekit ", 1)[1])
    args = build_parser().parse_args(run)
    assert args.out and not args.resume
    assert build_parser().parse_args([*run, "--resume"]).resume  # what the README tells a cut-off run
    opening = (ROOT / "README.md").read_text().split("## ", 1)[0]
    assert f"`--out {args.out}` included, plus `--resume`" in opening


def test_ci_runs_the_readme_test_command():
    assert readme_commands()[1] in (ROOT / ".ci" / "run").read_text().splitlines()


def test_readme_is_a_first_five_minutes_page():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    assert "commit `" not in text  # measurement histories live in the docs' results pages


def test_readme_protocol_table_names_every_builtin_protocol_with_its_paper():
    from debatekit import registry

    rows = {line.split("|")[1].strip(" `"): line.split("|")[2].strip()
            for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| `")}
    builtin = {name: spec.paper for name, spec in registry.available().items() if spec.source["kind"] == "builtin"}
    assert {name: rows.get(name) for name in builtin} == builtin
