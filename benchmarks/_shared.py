"""Where the benchmarks find the shared data (``$AGENTRAG_SHARED``, set by the Makefile, or the
repository's sibling ``../shared``), and the files they read when run without arguments."""

from __future__ import annotations

import os
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

DATA = Path(os.environ.get("AGENTRAG_SHARED", Path(__file__).resolve().parents[2] / "shared")) / "data"
#: the held-out multi-hop files the KB defaults were chosen on
RECALL_FILES = [DATA / "hotpotqa" / "dev_distractor_200.jsonl", DATA / "musique" / "train_100.jsonl"]


class IndexedRetriever:
    """The test ``FakeRetriever``'s ranking (word-overlap Jaccard, ties in passage order, then the
    zero-score passages) over an inverted index: each passage is tokenized once, and a search
    scores only the passages that share a word with the query. FakeRetriever tokenizes every
    passage per search (10.8 ms a search at 320 passages, 31.6 ms at 960), which measured the
    fake instead of the pipeline; a real KB's search is indexed.

    ``max_df=None``: the same hits as FakeRetriever. ``max_df=n``: only words of document
    frequency <= n select candidates (the first n passages when none does), an approximation for
    KBs of many near-identical documents (RAGShaper's distractor KB in synth_scale)."""

    def __init__(self, passages: list[Any], *, kb: str = "main", max_df: int | None = None) -> None:
        self.tok = re.compile(r"\w+")
        self.passages, self.kb, self.max_df = list(passages), kb, max_df
        self.words = [set(self.tok.findall(p.contents.lower())) for p in self.passages]
        self.post: dict[str, list[int]] = defaultdict(list)
        for i, ws in enumerate(self.words):
            for w in ws:
                self.post[w].append(i)
        self.calls = 0

    def _ranked(self, qt: set[str], k: int, threshold: float | None) -> list[tuple[float, int]]:
        if self.max_df is None:
            cand = {i for w in qt for i in self.post.get(w, ())}
        else:
            cand = {i for w in qt if len(self.post.get(w, ())) <= self.max_df for i in self.post.get(w, ())}
            cand = cand or set(range(min(self.max_df, len(self.passages))))
        scored = sorted(((len(qt & self.words[i]) / max(1, len(qt | self.words[i])), i) for i in cand),
                        key=lambda si: (-si[0], si[1]))
        scored = [s for s in scored if threshold is None or s[0] > threshold][:k]
        if self.max_df is None and len(scored) < k and (threshold is None or threshold < 0):
            # FakeRetriever scores every passage: the rest tie at 0, in passage order
            scored += [(0.0, i) for i in range(len(self.passages)) if i not in cand][:k - len(scored)]
        return scored

    def search(self, queries: list[str], k: int, threshold: float | None = None) -> list[list[Any]]:
        from agentrag.records import Hit

        self.calls += 1
        out = []
        for q in queries:
            ranked = self._ranked(set(self.tok.findall(q.lower())), k, threshold)
            out.append([Hit(id=self.passages[i].id, title=self.passages[i].title, text=self.passages[i].text,
                            score=s, method="fake", kb=self.kb, metadata=dict(self.passages[i].metadata))
                        for s, i in ranked])
        return out
