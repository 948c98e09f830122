"""Scripted models for tests that run the CLI in a subprocess and kill it there (as `tests.slow_model`).

    python -c "$CLI" run society_of_mind --model scripted/stalling-truth ...

Importing this module registers `scripted/stalling-truth`: it answers each item's number (the
digits of its id); with `$STALL_FROM=N` set, it never replies for items numbered N and above, so
the run stays alive, holding its folder, until it is killed; without it, it answers all.
"""

import os

from debatekit import scripted

CLI = "import tests.faulty_model, sys; from debatekit.cli import main; sys.exit(main(sys.argv[1:]))"


def _number(req: scripted.Request) -> int:
    return int("".join(c for c in req.item_id if c.isdigit()))


def _truth(req: scripted.Request) -> str:
    return f"{req.agent} worked it out.\nAnswer: {_number(req)}"


def _stalling(req: scripted.Request):
    stall_from = os.environ.get("STALL_FROM")
    if stall_from is not None and _number(req) >= int(stall_from):
        return scripted.Fault("hang")
    return _truth(req)


STALLING = scripted.register("stalling-truth", fn=_stalling)
