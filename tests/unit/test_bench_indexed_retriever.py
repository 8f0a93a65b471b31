"""benchmarks/_shared.py's IndexedRetriever (the remote-concurrency benchmark's Tracer KB) returns
the hits the test FakeRetriever returns — same ids, scores, ties and zero-score fill — so the
benchmark measures the pipeline, not a fake that tokenizes every passage per search."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path
from typing import Any

from tracer_support import PASSAGES

from agentrag.testing import FakeRetriever

SHARED = Path(__file__).resolve().parents[2] / "benchmarks" / "_shared.py"


def _indexed(passages: list[Any], **kw: Any) -> Any:
    spec = importlib.util.spec_from_file_location("bench_shared", SHARED)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.IndexedRetriever(passages, **kw)


def test_indexed_retriever_returns_fake_retrievers_hits() -> None:
    copies = [p.model_copy(update={"id": f"{p.id}-{k}", "title": f"{p.title} §{k}"}) for k in range(8) for p in PASSAGES]
    fake, indexed = FakeRetriever(copies), _indexed(copies)
    rng = random.Random(0)
    vocab = sorted({w for p in copies for w in p.contents.lower().split()}) + ["unknownword", "3"]
    for _ in range(120):
        q = " ".join(rng.sample(vocab, rng.randint(1, 5)))
        for k in (1, 3, len(copies) + 5):
            for th in (None, 0.0, 0.2):
                want = [(h.id, h.score, h.title) for h in fake.search([q], k, th)[0]]
                assert [(h.id, h.score, h.title) for h in indexed.search([q], k, th)[0]] == want, (q, k, th)
    # a query sharing no word: FakeRetriever's zero-score passages in order (no threshold), none with one
    assert [h.id for h in indexed.search(["zzzz"], 3)[0]] == [p.id for p in copies[:3]]
    assert indexed.search(["zzzz"], 3, 0.0) == [[]]


def test_max_df_drops_common_words_from_the_candidates() -> None:
    indexed = _indexed(list(PASSAGES), max_df=1)
    rare = {w for w, ids in indexed.post.items() if len(ids) == 1}
    word = sorted(rare)[0]
    hits = indexed.search([word], 10)[0]
    assert len(hits) == 1 and word in hits[0].contents.lower()
