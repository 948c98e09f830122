"""A slow scripted model for tests that run the CLI in a subprocess.

    python -c "import tests.slow_model, sys; from debatekit.cli import main; sys.exit(main(sys.argv[1:]))" \
        run society_of_mind --model scripted/slow-truth ...

Importing this module registers `scripted/slow-truth`: it answers each item's number (the
digits of its id) after 20 ms, so a run is slow enough to be killed mid-way.
"""

from debatekit.models import scripted

CLI = "import tests.slow_model, sys; from debatekit.cli import main; sys.exit(main(sys.argv[1:]))"


def _reply(req: scripted.Request):
    value = int("".join(c for c in req.item_id if c.isdigit()))
    return scripted.Delayed(0.02, {"reasoning": f"item {req.item_id}, {req.agent}, round {req.round}",
                                   "answer": value})


MODEL = scripted.register("slow-truth", fn=_reply)
