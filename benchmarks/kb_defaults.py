"""Which embedder backend and hybrid fusion settings to default to, measured on the shared data.

For each raw multi-hop file, a KB over its pooled context paragraphs is built twice (embedder
backend torch fp32 and onnx-int8; vectors cached under --cache so reruns are cheap), then
`eval_recall` (questions as queries) gives all@k / psg@k for bm25, dense, and hybrid under a grid
of weighted-RRF settings. It chose the embedder backend; the hybrid fusion default is chosen by
``benchmarks/fusion.py`` (tuned on one shared dataset, validated on the others), not by this grid,
which reads the two files the former RRF default was fitted to.

    PYTHONPATH=src .venv/bin/python benchmarks/kb_defaults.py \\
        ../shared/data/hotpotqa/dev_distractor_200.jsonl ../shared/data/musique/train_100.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from _shared import RECALL_FILES

from agentrag.kb import KBConfig, KnowledgeBase  # noqa: E402
from agentrag.kb.embedders import load_embedder  # noqa: E402
from agentrag.kb.ingest import gold_passages, pooled_passages  # noqa: E402
from agentrag.kb.recall import eval_recall  # noqa: E402

GRID = [(1.0, 1.0, 60.0), (1.0, 0.7, 10.0), (1.0, 1.0, 10.0), (1.0, 0.5, 10.0), (1.0, 1.5, 10.0),
        (1.0, 1.0, 30.0), (1.0, 1.5, 30.0), (1.0, 2.0, 60.0)]


class Cached:
    """Passage vectors from a file computed once per backend; queries embedded live."""

    def __init__(self, inner: object, table: dict[str, np.ndarray]) -> None:
        self.inner, self.table = inner, table
        self.dim, self.name = inner.dim, inner.name  # type: ignore[attr-defined]

    def embed(self, texts: list[str], kind: str = "query") -> np.ndarray:
        if kind == "passage":
            return np.stack([self.table[t] for t in texts])
        return self.inner.embed(texts, kind="query")  # type: ignore[attr-defined]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", type=Path, default=RECALL_FILES,
                    help="raw multi-hop files (default: the shared HotpotQA dev and MuSiQue files)")
    ap.add_argument("--backends", default="torch,onnx-int8")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/agentrag_kb_defaults"))
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    results = []
    for f in args.files:
        passages = list(pooled_passages([f]))
        texts = [p.contents for p in passages]
        for backend in args.backends.split(","):
            emb = load_embedder(None, backend=backend)
            key = hashlib.sha1(("\n".join(texts) + backend).encode()).hexdigest()[:12]
            vec_path = args.cache / f"{f.stem}.{backend}.{key}.npy"
            if vec_path.exists():
                vecs = np.load(vec_path)
            else:
                t0 = time.perf_counter()
                vecs = emb.embed(texts, kind="passage")
                print(f"# {f.name} {backend}: embedded {len(texts)} passages in {time.perf_counter() - t0:.0f}s",
                      flush=True)
                np.save(vec_path, vecs)
            kb_dir = args.cache / f"kb.{f.stem}.{backend}"
            KnowledgeBase.build(passages, kb_dir, KBConfig(), embedder=Cached(emb, dict(zip(texts, vecs, strict=True))),
                                gold=gold_passages(f), overwrite=True, progress=False)
            for w_b, w_d, rrf_k in GRID:
                kb = KnowledgeBase.load(kb_dir, embedder=emb, overrides=[
                    "hybrid.fusion=rrf", f"hybrid.weights.bm25={w_b}", f"hybrid.weights.dense={w_d}", f"hybrid.rrf_k={rrf_k}"])
                t = eval_recall(kb, f, ks=(5, args.k))
                row = {"file": f.name, "backend": backend, "bm25_w": w_b, "dense_w": w_d, "rrf_k": rrf_k,
                       **{f"{m}_all@{k}": round(t["methods"][m][k]["all"], 3) for m in t["methods"] for k in (5, args.k)},
                       **{f"{m}_psg@{args.k}": round(t["methods"][m][args.k]["passage"], 3) for m in t["methods"]}}
                results.append(row)
                print(json.dumps(row), flush=True)
    (args.cache / "results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
