"""Model output is data: nothing a model returns is executed or evaluated as code."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from debatekit.analysis import load_runs, round_metrics
from debatekit.models import scripted
from debatekit.records.schemas import RunConfig
from debatekit.runner import run

PACKAGE = Path(__file__).resolve().parent.parent / "debatekit"


def payloads(marker: Path) -> list[str]:
    """Code in the forms a template, shell, pandas or Python evaluator would run."""
    return [f"__import__('pathlib').Path({str(marker)!r}).touch()",
            f"{{{{ cycler.__init__.__globals__.os.system('touch {marker}') }}}}",
            f"$(touch {marker})",
            f"`touch {marker}`; exec(\"open({str(marker)!r}, 'w')\")",
            f"@pd.eval(\"__import__('os').system('touch {marker}')\")"]


def test_code_like_model_output_is_stored_verbatim_and_never_run(tmp_path):
    marker = tmp_path / "EXECUTED"
    code = payloads(marker)
    rows = [{"id": f"c{i}", "question": "Which command?", "answer": p} for i, p in enumerate(code)]
    dataset = tmp_path / "code.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def reply(req):  # every agent answers with the item's payload, as text and in its reasoning
        payload = code[int(req.item_id[1:])]
        return {"reasoning": payload, "answer": payload}

    model = scripted.register("code-speaker", fn=reply)
    result = run(RunConfig(protocol="society_of_mind", dataset=str(dataset), model=model,
                           params={"agents": 2, "rounds": 2, "answer_format": "json"}), tmp_path / "run", progress=False)
    tables = load_runs([result.path])
    round_metrics(tables)
    from debatekit.cli.tables import summary_table

    summary_table([result])
    assert not marker.exists()
    by_id = {d.item_id: d for d in result.debates}
    for i, payload in enumerate(code):
        assert by_id[f"c{i}"].final_answer == payload and by_id[f"c{i}"].correct
    events = [json.loads(line) for line in (result.path / "events.jsonl").read_text().splitlines()]
    assert {e["output"]["answer"] for e in events} == set(code)
    assert all(json.loads(e["text"]) == e["output"] for e in events)
    assert set(tables.turns["text"].map(lambda t: json.loads(t)["answer"])) == set(code)


# --- the package has no way to run text as code -------------------------------------------

FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__", "execfile"}
FORBIDDEN_ATTRS = {("pickle", "loads"), ("pickle", "load"), ("marshal", "loads"), ("shelve", "open"),
                   ("yaml", "load"), ("yaml", "unsafe_load"), ("yaml", "full_load"), ("os", "system"),
                   ("os", "popen"), ("dill", "loads"), ("cloudpickle", "loads")}


def offences(source: str, name: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, filename=name)):
        if not isinstance(node, ast.Call):
            continue
        func, where = node.func, f"{name}:{node.lineno}"
        if isinstance(func, ast.Name) and func.id in FORBIDDEN_CALLS:
            found.append(f"{where}: {func.id}()")
        if isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else None
            if (owner, func.attr) in FORBIDDEN_ATTRS:
                found.append(f"{where}: {owner}.{func.attr}()")
            # pandas.eval / DataFrame.eval evaluate their string: only literal expressions are allowed
            if func.attr == "eval" and node.args and not isinstance(node.args[0], ast.Constant):
                found.append(f"{where}: .{func.attr}() of a non-literal expression")
        for kw in node.keywords:
            if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                found.append(f"{where}: shell=")
    return found


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_evaluates_text_as_code(path):
    assert offences(path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE.parent))) == []


def test_the_scan_catches_what_it_forbids():
    source = ("import os, yaml\nx = eval(text)\nexec(code)\nyaml.load(s)\ndf.eval(expr)\n"
              "subprocess.run(cmd, shell=True)\nos.system(c)\ndf.eval('a > 1')\nyaml.safe_load(s)\n"
              "rag.query(text)\n")
    found = offences(source, "probe.py")
    assert [f.split(":")[1] for f in found] == ["2", "3", "4", "5", "6", "7"]
