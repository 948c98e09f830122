"""The run folder's format: versioned pydantic records, how they are written and read, and
what a reader is shown of them.

- `schemas`: `RunConfig`, `RunRecord` (run.json), `DebateRecord` (debates.jsonl), `CallEvent`
  (events.jsonl), `RoundRecord`, `Usage`, `DebateVerdict`.
- `trace`: `RunFolder`, the run folders of a sweep, item folder names.
- `storage`: atomic writes, whole-line JSONL appends and reads.
- `transcript`: a debate as text or HTML, call by call.
- `review`: the human-review queue and verdicts kept beside a run.
"""

from debatekit._base.lazy import exports

__all__ = ["CallEvent", "DebateRecord", "DebateVerdict", "RoundRecord", "RunConfig", "RunFolder", "RunFolderError",
           "RunRecord", "Usage", "read_jsonl"]
__getattr__, __dir__ = exports(__name__, {
    **dict.fromkeys(("CallEvent", "DebateRecord", "DebateVerdict", "RoundRecord", "RunConfig", "RunRecord", "Usage"),
                    "schemas"),
    **dict.fromkeys(("RunFolder", "RunFolderError"), "trace"), "read_jsonl": "storage"})
