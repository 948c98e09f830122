"""Internal knowledge base: chunking by heading, stable ids, BM25 ranking, the retrieval policy."""

import asyncio
import json
import time

import pytest

from debatekit.datasets import datasets_dir
from debatekit.protocols.dynamics.retrieval import (
    KnowledgeBase, Retriever, chunk_markdown, chunk_ref, citations, doc_prefix)

DOC = """# Colocation renewal

Prepared by Procurement.

## Offers

### 36-month renewal

- $61k a month, fixed.

### 12-month bridge

- $69k a month.

## Exit
Certified data destruction at our cost.
"""


def test_chunks_follow_headings_with_their_path():
    chunks = chunk_markdown(DOC, "colo.md", "CR")
    assert [c.id for c in chunks] == ["CR_01", "CR_02", "CR_03", "CR_04"]
    assert [c.heading for c in chunks] == [
        "Colocation renewal", "Colocation renewal > Offers > 36-month renewal",
        "Colocation renewal > Offers > 12-month bridge", "Colocation renewal > Exit"]
    assert chunks[1].text == "- $61k a month, fixed." and chunks[3].doc == "colo.md"


@pytest.mark.parametrize("stem, prefix", [
    ("frankfurt-colo-contract-summary", "FCCS"), ("postmortem-2024-us-east-migration", "P2UEM"), ("x", "X")])
def test_doc_prefix(stem, prefix):
    assert doc_prefix(stem) == prefix


@pytest.fixture
def kb_dir(tmp_path):
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "colo-renewal.md").write_text(DOC)
    (folder / "cost-review.md").write_text("# Cost review\n\n## Cloud\nAWS eu-central-1 would cost $58k a month.\n")
    (folder / "customer-retention.md").write_text("# Customer retention\n\n## Churn\nSMB churn rose 3.3 points.\n")
    return folder


def test_knowledge_base_ids_are_stable_and_ranking_finds_the_section(kb_dir):
    kb = KnowledgeBase.from_folder(kb_dir)
    ids = [c.id for c in kb.chunks]
    assert ids == ["CR_01", "CR_02", "CR_03", "CR_04", "CR2_01", "CR3_01"]  # same initials: numbered
    assert KnowledgeBase.from_folder(kb_dir) is kb  # built once per folder
    assert [c.id for c in kb.search("12-month bridge price", k=1)] == ["CR_03"]
    assert kb.search("AWS cloud cost", k=2)[0].id == "CR2_01"
    assert kb.search("zebra unicorn", k=3) == []  # nothing shares a term: nothing returned


def test_shipped_knowledge_base_covers_every_decision_source():
    kb = KnowledgeBase.from_folder(datasets_dir() / "knowledge" / "decisions")
    docs = {c.doc for c in kb.chunks}
    rows = [json.loads(line) for line in (datasets_dir() / "decisions.jsonl").read_text().splitlines() if line]
    assert len(rows) >= 12
    for row in rows:
        assert set(row["sources"]) <= docs, row["id"]
    assert len({c.id for c in kb.chunks}) == len(kb.chunks)


def test_query_limit_refuses_and_records(kb_dir):
    rag = Retriever(KnowledgeBase.from_folder(kb_dir), max_queries=2, timeout=5)

    async def go():
        return [await rag.query(q, "CFO") for q in ("bridge", "cloud cost", "churn")]

    first, second, third = asyncio.run(go())
    assert first and second and third == []
    assert [q["status"] for q in rag.queries] == ["ok", "ok", "refused"]
    summary = rag.summary()
    assert (summary["total"], summary["sucesso"], summary["timeout"], summary["recusadas"]) == (2, 2, 0, 1)


def test_slow_query_times_out_and_the_debate_goes_on(kb_dir, monkeypatch):
    kb = KnowledgeBase.from_folder(kb_dir)
    monkeypatch.setattr(kb, "search", lambda query, k: time.sleep(0.5) or [])
    rag = Retriever(kb, max_queries=5, timeout=0.05)
    assert asyncio.run(rag.query("bridge")) == []
    assert rag.queries[0]["status"] == "timeout" and rag.summary()["timeout"] == 1 and rag.used == 1


def test_citations_are_checked_against_returned_chunks(kb_dir):
    rag = Retriever(KnowledgeBase.from_folder(kb_dir), k=1)
    asyncio.run(rag.query("12-month bridge"))
    text = "Bridge is cheaper [RAG:CR_03] but see [RAG: CR_02] and [RAG:ZZ_99]."
    assert citations(text) == ["CR_03", "CR_02", "ZZ_99"]
    valid, invalid = rag.check(citations(text) + [chunk_ref("[RAG:CR_03]")], agent="CFO", round=1)
    assert valid == ["CR_03"] and invalid == ["CR_02", "ZZ_99"]  # CR_02 exists but was never returned
    assert rag.summary()["chunks_citados"] == ["CR_03"]
    assert rag.invalid == [{"chunk_id": "CR_02", "agent": "CFO", "round": 1},
                           {"chunk_id": "ZZ_99", "agent": "CFO", "round": 1}]
