"""Dense index types on real embeddings: recall (all@10, psg@10 via eval_recall), bytes per passage
in the index file, and search latency, for flat / hnsw / ivfpq over the same vectors.

Vectors: the embedded MiniLM (torch fp32) over each file's pooled context paragraphs, cached by
``benchmarks/kb_defaults.py`` (run it first, or this script embeds them). IVF-PQ here uses
nlist 32 (the corpora are small), 48 sub-quantizers of 8 bits (8 dims each), nprobe 16 / 32.

    PYTHONPATH=src .venv/bin/python benchmarks/kb_index_types.py \\
        ../shared/data/hotpotqa/dev_distractor_200.jsonl ../shared/data/musique/train_100.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _shared import RECALL_FILES
from kb_defaults import Cached  # noqa: E402

from agentrag.kb import KBConfig, KnowledgeBase  # noqa: E402
from agentrag.kb.embedders import load_embedder  # noqa: E402
from agentrag.kb.ingest import gold_passages, pooled_passages, questions  # noqa: E402
from agentrag.kb.recall import eval_recall  # noqa: E402

SETTINGS = [("flat", {}), ("hnsw", {"hnsw_m": 32, "ef_search": 128}),
            ("ivfpq", {"nlist": 32, "pq_m": 48, "nprobe": 16}), ("ivfpq", {"nlist": 32, "pq_m": 48, "nprobe": 32})]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", type=Path, default=RECALL_FILES,
                    help="raw multi-hop files (default: the shared HotpotQA dev and MuSiQue files)")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/agentrag_kb_defaults"))
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    emb = load_embedder(None, backend="torch")
    print("| file | index | all@10 | psg@10 | index bytes/passage | ms/query (index only) |\n|---|---|---|---|---|---|")
    for f in args.files:
        passages = list(pooled_passages([f]))
        texts = [p.contents for p in passages]
        key = hashlib.sha1(("\n".join(texts) + "torch").encode()).hexdigest()[:12]
        path = args.cache / f"{f.stem}.torch.{key}.npy"
        vecs = np.load(path) if path.exists() else emb.embed(texts, kind="passage")
        np.save(path, vecs)
        qvecs = emb.embed([q for _, q, _ in questions(f)], kind="query")
        for kind, extra in SETTINGS:
            d = args.cache / f"idx.{f.stem}.{kind}"
            cfg = KBConfig(method="dense", index={"type": kind, **extra})
            KnowledgeBase.build(passages, d, cfg, embedder=Cached(emb, dict(zip(texts, vecs, strict=True))),
                                gold=gold_passages(f), overwrite=True, progress=False)
            kb = KnowledgeBase.load(d, embedder=emb, overrides=[f"index.{k}={v}" for k, v in extra.items()
                                                                if k in ("nprobe", "ef_search")])
            t = eval_recall(kb, f, methods=("dense",), ks=(10,))["methods"]["dense"][10]
            assert kb.dense is not None
            t0 = time.perf_counter()
            for _ in range(5):
                for q in qvecs:
                    kb.dense.search_vectors(q[None, :], 10)
            ms = (time.perf_counter() - t0) * 1000 / (5 * len(qvecs))
            size = (d / "dense.faiss").stat().st_size / len(kb)
            label = kind + "".join(f" {k}={v}" for k, v in extra.items())
            print(f"| {f.name} | {label} | {t['all']:.3f} | {t['passage']:.3f} | {size:.0f} | {ms:.3f} |", flush=True)


if __name__ == "__main__":
    main()
