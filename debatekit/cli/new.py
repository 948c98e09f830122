"""`debatekit new protocol NAME [--dir DIR]`: a two-agent protocol file and its test, to start from.

    debatekit new protocol pair --dir my_protocols
    debatekit run my_protocols/pair.py:pair --dataset arithmetic --limit 3
    python -m pytest my_protocols/test_pair.py     # runs it end to end on a scripted model

The file lives wherever the researcher keeps their code; debatekit loads it by path
(`FILE.py:NAME` wherever a protocol name is taken) or, once packaged, through the
`debatekit.protocols` entry point group.
"""

from __future__ import annotations

import keyword
from pathlib import Path

PROTOCOL = '''"""{name}: two agents answer, read each other's latest answer and revise, until they agree.

Run it with `debatekit run {path}:{name} --dataset arithmetic --limit 3`.
"""

from __future__ import annotations

from debatekit.engine import Outcome, agreement
from debatekit.protocols.shared.answers import DEFAULT_FORMAT, AnswerFormat, first_messages, spec_for
from debatekit.registry import protocol


@protocol("{name}")
def {name}(agents: list[str] = ["proposer", "critic"], rounds: int = 3, temperature: float = 0.7,
{indent}answer_format: AnswerFormat = DEFAULT_FORMAT, models: dict[str, str] = {{}}):
    """Two agents answer, read each other's latest answer and revise, until they agree."""

    async def run(item, debate):
        spec = spec_for(item, format=answer_format)
        talk = {{agent: first_messages(spec, item.question) for agent in agents}}
        latest = {{}}

        async def step(round_no: int) -> None:
            if round_no > 1:
                for agent in agents:
                    said = "\\n\\n".join(f"{{other}} answered:\\n{{spec.shown(latest[other])}}"
                                       for other in agents if other != agent and other in latest)
                    talk[agent].append({{"role": "user", "content": f"{{said}}\\n\\nCheck your answer against "
                                                                   f"theirs. {{spec.closing()}}"}})
            turns = await debate.gather(
                debate.ask(agent, talk[agent], spec.output, phase="answer" if round_no == 1 else "revise",
                           round=round_no, temperature=temperature, model=models.get(agent))
                for agent in agents)
            for turn in turns:
                if turn.ok:
                    talk[turn.agent].append({{"role": "assistant", "content": turn.text}})
                    latest[turn.agent] = turn.parsed
                elif round_no > 1:
                    talk[turn.agent].pop()  # keep the conversation well formed
            debate.record_round(round_no, {{a: latest[a].answer if a in latest else None for a in agents}})

        reason = await debate.rounds(step, rounds, stop=[agreement])
        first = latest.get(agents[0])
        return Outcome(final_answer=first.answer if first else None, converged=reason == "agreement")

    return run
'''

TEST = '''"""{name} driven end to end by a scripted model: what each agent answered and was shown."""

import json
from pathlib import Path

from debatekit.models import scripted
from debatekit.runner import run
from debatekit.records.schemas import RunConfig

PROTOCOL = f"{{Path(__file__).with_name('{name}.py')}}:{name}"


def test_the_critic_comes_round_to_the_proposer(tmp_path):
    def reply(request):
        wrong = request.agent == "critic" and request.round == 1
        return {{"reasoning": f"{{request.agent}} works it out", "answer": 11 if wrong else 10}}

    data = tmp_path / "items.jsonl"
    data.write_text(json.dumps({{"id": "q1", "question": "What is 10?", "answer": 10}}) + "\\n")
    model = scripted.register("{name}-test", fn=reply)
    result = run(RunConfig(protocol=PROTOCOL, dataset=str(data), model=model,
                           params={{"answer_format": "json"}}), tmp_path / "run", progress=False)
    (debate,) = result.debates
    assert debate.correct is True and debate.stop_reason == "agreement"
    assert [r.answers for r in debate.rounds] == [{{"proposer": 10, "critic": 11}}, {{"proposer": 10, "critic": 10}}]
    events = [json.loads(line) for line in (result.path / "events.jsonl").read_text().splitlines()]
    shown = next(e for e in events if e["agent"] == "critic" and e["round"] == 2)["messages"][-1]["content"]
    assert "proposer answered" in shown
    assert result.record.protocol_source["kind"] == "file"
'''


def add(subparsers) -> dict:
    p = subparsers.add_parser("new", help="write a starting point: `new protocol NAME` (a two-agent protocol and its test)")
    # each kind of starting point is a subcommand, so that `new protocol --help` is its own help
    kinds = p.add_subparsers(dest="what", required=True, metavar="KIND")
    made = kinds.add_parser("protocol", help="a two-agent protocol file and its test, to start from",
                            description="Write NAME.py (a two-agent protocol registered as NAME) and test_NAME.py "
                                        "(it runs the protocol end to end on a scripted model).")
    made.add_argument("name", help="the protocol's name (a Python identifier)")
    made.add_argument("--dir", default=".", help="folder to write NAME.py and test_NAME.py into (default: here)")
    return {"new": run}


def run(args) -> int:
    name = args.name
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"protocol name {name!r} must be a Python identifier (letters, digits, _)")
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for path, text in ((folder / f"{name}.py", PROTOCOL), (folder / f"test_{name}.py", TEST)):
        if path.exists():
            raise ValueError(f"{path} exists; choose another name or --dir")
        path.write_text(text.format(name=name, path=folder / f"{name}.py", indent=" " * (len(name) + 5)),
                        encoding="utf-8")
        written.append(path)
    print(f"wrote {written[0]} and {written[1]}\n"
          f"run it:  debatekit run {written[0]}:{name} --dataset arithmetic --limit 3\n"
          f"test it: python -m pytest {written[1]}")
    return 0
