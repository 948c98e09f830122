"""`debatekit review RUN_DIR`: list escalated debates, show one, record a human verdict.

    debatekit review runs/x                                   # pending items and counts
    debatekit review runs/x --show lc-001                     # what the reviewer reads
    debatekit review runs/x --item lc-001 --verdict approve --note "synthesis is right"
    debatekit review runs/x --interactive                     # walk the pending items
"""

from __future__ import annotations

from pathlib import Path


def add(subparsers) -> dict:
    p = subparsers.add_parser("review", help="human review of escalated debates in a run folder")
    p.add_argument("run_dir", metavar="RUN_DIR", help="run folder")
    p.add_argument("--show", metavar="ID", help="show the escalation and debate summary of an item")
    p.add_argument("--item", metavar="ID", help="item to record a verdict for")
    p.add_argument("--verdict", choices=["approve", "reject", "revise"], help="the verdict")
    p.add_argument("--note", default="", help="the reviewer's note")
    p.add_argument("--reviewer", help="reviewer name (default: login name)")
    p.add_argument("--interactive", action="store_true", help="ask for a verdict on each pending item")
    return {"review": cmd_review}


def cmd_review(args) -> int:
    from debatekit._base.terminal import visible
    from debatekit.records import review

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise ValueError(f"run folder not found: {run_dir}")
    if not (run_dir / "run.json").exists():  # a typo'd or parent folder would read as nothing to review
        raise ValueError(f"{run_dir} is not a run folder (no run.json)")
    if (args.item is None) != (args.verdict is None):
        raise ValueError("--item and --verdict go together")
    if args.show:
        entry = next((q for q in review.queue(run_dir) if q.item_id == args.show), None)
        if entry is None:
            raise ValueError(f"item {args.show!r} is not in the review queue of {run_dir}")
        print(visible(_describe(run_dir, entry)))
        return 0
    if args.item:
        done = review.record_verdict(run_dir, args.item, args.verdict, args.note, args.reviewer)
        print(visible(f"recorded {done.verdict} for {done.item_id}"))
    elif args.interactive:
        _interactive(run_dir, args.reviewer)
    else:
        for entry in review.pending(run_dir):
            print(visible(f"{entry.item_id:16} {entry.protocol:16} {entry.escalation_reason or '-'}"))
    c = review.counts(run_dir)
    print(f"escalated {c['escalated']}, reviewed {c['reviewed']}, pending {c['review_pending']}")
    return 0


def _interactive(run_dir: Path, reviewer: str | None) -> None:
    from debatekit._base.terminal import visible
    from debatekit.records import review

    keys = {"a": "approve", "r": "reject", "v": "revise"}
    for entry in review.pending(run_dir):
        print(visible(_describe(run_dir, entry)))
        choice = ""
        while choice not in keys and choice != "s":
            choice = input("verdict [a]pprove [r]eject re[v]ise [s]kip: ").strip().lower()[:1]
        if choice == "s":
            continue
        note = input("note: ")
        review.record_verdict(run_dir, entry.item_id, keys[choice], note, reviewer)
        print(visible(f"recorded {keys[choice]} for {entry.item_id}\n"))


def _describe(run_dir: Path, entry) -> str:
    from debatekit import registry
    from debatekit.records import review

    return review.describe(run_dir, entry, registry.views_of(entry.protocol).review)
