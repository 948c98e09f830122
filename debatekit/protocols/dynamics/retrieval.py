"""Internal knowledge base (seed 003, S3.5): markdown documents chunked by heading, BM25 ranking.

A knowledge base is a folder of markdown files (`datasets/knowledge/<name>/*.md`). Each file
is cut at its headings; every section with text is one `Chunk` whose id is stable: the
initials of the file name and the section's position in the file (`FCCS_03` is the third
section of `frankfurt-colo-contract-summary.md`). Ranking is BM25 (the `bm25s` library).

A `Retriever` is one debate's access to a knowledge base under the seed's policy: at most
`max_queries` queries, `timeout` seconds each, and every citation `[RAG:chunk_id]` checked
against the chunks the debate actually received. No external search exists here.

    kb = KnowledgeBase.from_folder("datasets/knowledge/decisions")
    rag = Retriever(kb, max_queries=5, timeout=15)
    chunks = await rag.query("colocation renewal notice", agent="CFO")
    valid, invalid = rag.check(["FCCS_03", "XX_99"])
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

CITATION = re.compile(r"\[RAG:\s*([A-Za-z0-9_.:#-]+)\s*\]")
HEADING = re.compile(r"^(#{1,6})\s+(.*\S)\s*$")


@dataclass(frozen=True)
class Chunk:
    """One section of one document."""

    id: str
    doc: str
    heading: str
    text: str


def doc_prefix(stem: str) -> str:
    """Initials of a file name's words, upper case: `postmortem-2024-us-east` -> `P2UE`."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", stem) if w]
    return "".join(w[0] for w in words).upper() or "DOC"


def chunk_markdown(text: str, doc: str, prefix: str) -> list[Chunk]:
    """Cut a markdown document at its headings; sections without text are folded into the next.

    The heading of a chunk is its path (`Title > Section > Subsection`); chunk ids are
    `{prefix}_{NN}` numbered from 01 in document order.
    """
    chunks: list[Chunk] = []
    path: list[tuple[int, str]] = []
    body: list[str] = []

    def flush() -> None:
        content = "\n".join(body).strip()
        if content:
            heading = " > ".join(title for _, title in path) or doc
            chunks.append(Chunk(f"{prefix}_{len(chunks) + 1:02d}", doc, heading, content))
        body.clear()

    for line in text.splitlines():
        match = HEADING.match(line)
        if match:
            flush()
            level = len(match.group(1))
            path[:] = [(lv, t) for lv, t in path if lv < level] + [(level, match.group(2))]
        else:
            body.append(line)
    flush()
    return chunks


class KnowledgeBase:
    """Chunks of a folder of markdown documents, ranked by BM25."""

    def __init__(self, chunks: list[Chunk]):
        import bm25s

        self.chunks = chunks
        self.by_id = {c.id: c for c in chunks}
        self._bm25 = bm25s
        self._index = bm25s.BM25()
        corpus = [f"{c.heading}\n{c.text}" for c in chunks]
        self._index.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False)

    @classmethod
    def from_folder(cls, folder: Path | str) -> KnowledgeBase:
        """The knowledge base of `folder` (built once per folder and process)."""
        return _load(str(Path(folder).resolve()))

    def search(self, query: str, k: int = 3) -> list[Chunk]:
        """The `k` best chunks for `query`; chunks sharing no term with it are left out."""
        tokens = self._bm25.tokenize([query], stopwords="en", show_progress=False, return_ids=False)
        if not tokens[0] or not self.chunks:
            return []
        found = self._index.retrieve(tokens, k=min(k, len(self.chunks)), show_progress=False)
        return [self.chunks[int(i)] for i, score in zip(found.documents[0], found.scores[0]) if score > 0]


@lru_cache(maxsize=16)
def _load(folder: str) -> KnowledgeBase:
    files = sorted(Path(folder).glob("*.md"))
    if not files:
        raise FileNotFoundError(f"knowledge base {folder} has no markdown documents")
    prefixes: dict[str, int] = {}
    chunks: list[Chunk] = []
    for path in files:
        prefix = doc_prefix(path.stem)
        prefixes[prefix] = prefixes.get(prefix, 0) + 1
        if prefixes[prefix] > 1:  # two files with the same initials: number the later ones
            prefix = f"{prefix}{prefixes[prefix]}"
        chunks.extend(chunk_markdown(path.read_text(encoding="utf-8"), path.name, prefix))
    return KnowledgeBase(chunks)


def chunk_ref(ref: str) -> str:
    """A chunk id as written in an evidence list: `[RAG:FCCS_03]`, `RAG:FCCS_03` or `FCCS_03`."""
    return re.sub(r"^\[?\s*RAG:\s*|\s*\]$", "", (ref or "").strip())


def citations(text: str) -> list[str]:
    """Chunk ids cited as `[RAG:chunk_id]` in a text, in order."""
    return CITATION.findall(text or "")


@dataclass
class Retriever:
    """One debate's retrieval under the seed's policy (query limit, timeout, citation check)."""

    kb: KnowledgeBase
    max_queries: int = 5
    timeout: float = 15.0
    k: int = 3
    queries: list[dict] = field(default_factory=list)
    returned: dict[str, Chunk] = field(default_factory=dict)
    cited: set[str] = field(default_factory=set)
    invalid: list[dict] = field(default_factory=list)

    @property
    def used(self) -> int:
        """Queries that counted against the limit (answered or timed out)."""
        return sum(q["status"] != "refused" for q in self.queries)

    async def query(self, text: str, agent: str | None = None) -> list[Chunk]:
        """Run one query; past the limit or the timeout it returns nothing and is recorded."""
        entry = {"query": text, "agent": agent, "status": "refused", "chunks": [], "ms": 0}
        if self.used >= self.max_queries:
            self.queries.append(entry)
            return []
        entry["status"] = "running"
        self.queries.append(entry)
        started = time.monotonic()
        try:
            found = await asyncio.wait_for(asyncio.to_thread(self.kb.search, text, self.k), self.timeout)
        except asyncio.TimeoutError:
            entry["status"] = "timeout"
            return []
        finally:
            entry["ms"] = round((time.monotonic() - started) * 1000)
        entry.update(status="ok", chunks=[c.id for c in found])
        self.returned.update({c.id: c for c in found})
        return found

    def check(self, ids: list[str], agent: str | None = None, round: int | None = None) -> tuple[list[str], list[str]]:
        """Split cited chunk ids into those the debate received and those it did not (recorded)."""
        valid, bad = [], []
        for chunk_id in dict.fromkeys(i.strip() for i in ids if i and i.strip()):
            (valid if chunk_id in self.returned else bad).append(chunk_id)
        self.cited.update(valid)
        self.invalid.extend({"chunk_id": c, "agent": agent, "round": round} for c in bad)
        return valid, bad

    def summary(self) -> dict:
        """The seed's `rag_queries` block, plus refused queries and invalid citations."""
        return {"total": self.used, "sucesso": sum(q["status"] == "ok" for q in self.queries),
                "timeout": sum(q["status"] == "timeout" for q in self.queries),
                "recusadas": sum(q["status"] == "refused" for q in self.queries),
                "chunks_citados": sorted(self.cited), "citacoes_invalidas": self.invalid,
                "consultas": self.queries}
