"""`debatekit fork RUN --at-round R --out NEW [change]`: a counterfactual of a recorded run.

    debatekit fork runs/som --at-round 2 --out runs/som-wrong --replace agent1=wrong
    debatekit fork runs/som --at-round 2 --out runs/som-adv --adversarial agent2
    debatekit fork runs/som --at-round 2 --out runs/som-mine --intervention mine.py:nudge --with agent=agent1

The rounds before R are played back from the run's record (no model call); from R on, the run's
model (or `--model`) is asked, with at most one change (`debatekit.sweep.forks`). The fork runs the
same items under the same seeds, so it pairs with its parent: the command prints its results and
the paired comparison with the parent.
"""

from __future__ import annotations

from pathlib import Path

from debatekit.cli.flags import out_path, positive


def add(subparsers) -> dict:
    p = subparsers.add_parser("fork", help="fork a recorded run at a round and change one thing from there")
    p.add_argument("run", metavar="RUN", help="the run folder to fork")
    p.add_argument("--at-round", type=int, required=True, metavar="R",
                   help="the first round asked of a model; the rounds before it come from the record")
    p.add_argument("--out", type=out_path, required=True, metavar="NEW", help="the fork's run folder")
    change = p.add_mutually_exclusive_group()
    change.add_argument("--replace", metavar="AGENT=BY",
                        help="in round R the others read BY in place of AGENT's previous reply: wrong, correct, "
                             "or another agent's name")
    change.add_argument("--adversarial", metavar="AGENT", help="from round R, AGENT argues for the wrong answer")
    change.add_argument("--swap-model", metavar="AGENT=MODEL", help="from round R, AGENT's calls go to MODEL")
    change.add_argument("--persona", metavar="AGENT=TEXT", help="from round R, AGENT plays the role TEXT")
    change.add_argument("--hide", metavar="AGENT", help="from round R, AGENT reads no other reply (it checks its own)")
    change.add_argument("--reorder", choices=["reverse", "shuffle"],
                        help="from round R, the replies read come in this order")
    change.add_argument("--anonymise", action="store_true",
                        help="from round R, the replies read name no agent and come shuffled")
    change.add_argument("--intervention", metavar="NAME",
                        help="a registered intervention, or path/to/file.py:NAME (parameters with --with)")
    p.add_argument("--with", dest="withs", action="append", default=[], metavar="KEY=VALUE",
                   help="a parameter of --intervention, repeatable")
    p.add_argument("--model", help="the model of every call from round R (default: the run's)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="a protocol parameter changed from the run's, e.g. stop_on_agreement=false")
    p.add_argument("--no-cache", action="store_true", help="ask the model from round R even where a reply is cached")
    p.add_argument("--resume", action="store_true", help="continue the fork in --out")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--resample", type=int, metavar="K",
                   help="draw the calls from round R on under new sampling seeds (K picks them); without it a "
                        "fork asks with the parent's seeds, and one that changes nothing repeats the parent")
    p.add_argument("--dataset", metavar="PATH",
                   help="the parent's dataset file, where the path its run.json records does not reach it from here")
    p.add_argument("--limit", type=int, metavar="N",
                   help="fork only the parent's first N items (an estimate; --resume without it goes on to the rest)")
    p.add_argument("--concurrency", type=positive, metavar="N",
                   help="debates at once (default: as the parent ran); forks run side by side share a local engine")
    return {"fork": run}


def chosen(args) -> tuple[str, dict] | None:
    """The intervention the flags name, as (name, parameters), or None."""
    from debatekit.cli.app import _parse_set

    if args.withs and not args.intervention:
        raise ValueError("--with sets a parameter of --intervention NAME; name one")
    if args.intervention:
        return args.intervention, _parse_set(args.withs)
    if args.replace:
        agent, by = _pair("--replace", args.replace)
        return "replace", {"agent": agent, "by": by}
    if args.swap_model:
        agent, model = _pair("--swap-model", args.swap_model)
        return "swap_model", {"agent": agent, "model": model}
    if args.persona:
        agent, text = _pair("--persona", args.persona)
        return "persona", {"agent": agent, "persona": text}
    for name, agent in (("adversarial", args.adversarial), ("hide", args.hide)):
        if agent:
            return name, {"agent": agent}
    if args.reorder:
        return "reorder", {"order": args.reorder}
    return ("anonymise", {}) if args.anonymise else None


def _pair(flag: str, text: str) -> tuple[str, str]:
    left, sep, right = text.partition("=")
    if not sep or not left.strip() or not right.strip():
        raise ValueError(f"{flag} {text!r} is not AGENT=VALUE")
    return left.strip(), right.strip()


def run(args) -> int:
    from debatekit._base.terminal import visible
    from debatekit.cli.app import _parse_set
    from debatekit.cli.tables import paired_block, summary_table
    from debatekit.records.trace import RunFolder
    from debatekit.runner import RunResult
    from debatekit.sweep.forks import fork, make

    picked = chosen(args)
    result = fork(args.run, at_round=args.at_round, out=args.out, intervention=make(*picked) if picked else None,
                  model=args.model, params=_parse_set(args.sets), cache=False if args.no_cache else None,
                  resume=args.resume, progress=not args.quiet, limit=args.limit, resample=args.resample,
                  dataset=args.dataset, concurrency=args.concurrency)
    parent = RunFolder(args.run)
    before = RunResult(Path(args.run), parent.read_run(), parent.debates())
    print(visible(summary_table([result])))
    print("\nthe fork against its parent, paired on their items:\n" + visible(paired_block([before, result])))
    return 0 if result.record.status == "complete" else 1
