"""`kb import` of a FlashRAG-layout FAISS Flat index built with the embedded MiniLM embedder."""

import json

import faiss
import pytest

from agentrag.kb import KBConfig, KnowledgeBase
from agentrag.kb.embedders import load_embedder
from agentrag.kb.importer import import_kb
from agentrag.kb.ingest import read_corpus

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_import_prebuilt_minilm_flat_index_equals_native_build(tmp_path, data_dir):
    src = data_dir / "corpora" / "musique_train_passages_1890.jsonl"
    passages = [p for _, p in zip(range(120), read_corpus(src), strict=False)]
    corpus = tmp_path / "corpus.jsonl"
    with corpus.open("w", encoding="utf-8") as fh:
        for i, p in enumerate(passages):
            fh.write(json.dumps({"id": str(i), "contents": f'"{p.title}"\n{p.text}'}) + "\n")
    emb = load_embedder(None, backend="torch")
    # FlashRAG's layout: index_factory(dim, "Flat", METRIC_INNER_PRODUCT), row i = corpus line i
    index = faiss.index_factory(emb.dim, "Flat", faiss.METRIC_INNER_PRODUCT)
    index.add(emb.embed([p.contents for p in read_corpus(corpus)], kind="passage"))
    faiss.write_index(index, str(tmp_path / "minilm_Flat.index"))
    cfg = KBConfig(embedder={"model": "embedded", "backend": "torch", "pooling": "mean", "query_prefix": ""})
    imported = import_kb(corpus, tmp_path / "imp", cfg, faiss_index=tmp_path / "minilm_Flat.index")
    native = KnowledgeBase.build(read_corpus(corpus), tmp_path / "native", KBConfig(embedder={"backend": "torch"}),
                                 embedder=emb, progress=False)
    again = KnowledgeBase.load(imported.directory)  # the embedder is rebuilt from params (name, pooling, prefix)
    qs = ["Who edits the Journal of Mathematical Physics?", "What is person-centered therapy?"]
    for method in ("dense", "hybrid", "bm25"):
        a, b = again.search(qs, 5, method=method), native.search(qs, 5, method=method)
        assert [[h.id for h in r] for r in a] == [[h.id for h in r] for r in b], method
    assert again.search(qs[:1], 1, method="dense")[0][0].title == "Journal of Mathematical Physics"
