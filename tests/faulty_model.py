"""Scripted models for tests that run the CLI in a subprocess and kill it there (as `tests.slow_model`).

    python -c "$CLI" run society_of_mind --model scripted/stalling-truth ...

Importing this module registers two models; both answer each item's number (the digits of its id):

- `scripted/stalling-truth`: with `$STALL_FROM=N` set, it never replies for items numbered N and
  above, so the run stays alive, holding its folder, until it is killed; without it, it answers all.
- `scripted/faulty-truth`: 20% of attempts fail (timeout, 429, 500, empty reply; chosen from the
  call and its attempt, so the same in every process), and every call for an item whose number
  ends in 7 fails with a 500 whatever the attempt: those items end `error`, never scored.
"""

import hashlib
import os
import random
from collections import Counter

from debatekit.models import scripted

CLI = "import tests.faulty_model, sys; from debatekit.cli import main; sys.exit(main(sys.argv[1:]))"
FAULT_RATE = 0.2
FAULTS = ("timeout", "rate_limit", "server", "empty")


def _number(req: scripted.Request) -> int:
    return int("".join(c for c in req.item_id if c.isdigit()))


def _truth(req: scripted.Request) -> str:
    return f"{req.agent} worked it out.\nAnswer: {_number(req)}"


def _stalling(req: scripted.Request):
    stall_from = os.environ.get("STALL_FROM")
    if stall_from is not None and _number(req) >= int(stall_from):
        return scripted.Fault("hang")
    return _truth(req)


_attempts: Counter = Counter()


def _faulty(req: scripted.Request):
    if _number(req) % 10 == 7:
        return scripted.Fault("server", "always down for this item")
    key = (req.item_id, req.agent, req.round, req.phase, len(req.messages))
    _attempts[key] += 1
    rng = random.Random(int(hashlib.sha256(repr((key, _attempts[key])).encode()).hexdigest()[:12], 16))
    if rng.random() >= FAULT_RATE:
        return _truth(req)
    kind = rng.choice(FAULTS)
    return "" if kind == "empty" else scripted.Fault(kind)


STALLING = scripted.register("stalling-truth", fn=_stalling)
FAULTY = scripted.register("faulty-truth", fn=_faulty)
