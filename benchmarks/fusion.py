"""Choose the hybrid fusion by a protocol that cannot overfit: tune on one set, report on the others.

For each shared multi-hop file a KB is built from that file's own context paragraphs, as a new
user would (``agentrag kb build FILE --out DIR --method hybrid``, here through ``build_kb`` with
the default config and embedder). Its BM25 and dense runs (top ``--depth`` with scores, the
question as the query) are computed once and cached under ``--cache``; every fusion candidate is
then applied offline to the same runs with :func:`agentrag.kb.fusion.fuse`, the function the KB
uses, and scored with all@k / psg@k as in ``agentrag kb eval-recall``.

The candidate is chosen on the tune set only (highest all@10, then psg@10, then the earlier
entry of the candidate list); the other files report bm25, dense, the former default, the chosen
candidate and its margin over the better single method.

    PYTHONPATH=src .venv/bin/python benchmarks/fusion.py            # all shared files, table to stdout
    PYTHONPATH=src .venv/bin/python benchmarks/fusion.py --all      # every candidate on every file

The first run embeds ~23,000 passages (about 30-60 min on a busy 2-core CPU; the KBs resume if
killed); reruns read the cached runs and take a minute. ``--first N`` validates on the first N
questions of each validation file (a KB of their contexts) when time is short.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from _shared import DATA  # noqa: E402

from agentrag.kb import KnowledgeBase, build_kb, load_embedder  # noqa: E402
from agentrag.kb.config import HybridConfig  # noqa: E402
from agentrag.kb.fusion import Ranked, fuse  # noqa: E402
from agentrag.kb.ingest import questions  # noqa: E402

TUNE = DATA / "2wikimultihopqa" / "train_600.jsonl"
#: smallest KB first
VALIDATION = [DATA / "hotpotqa" / "train_distractor_100.jsonl", DATA / "2wikimultihopqa" / "dev_with_context_164.jsonl",
              DATA / "musique" / "train_100.jsonl", DATA / "hotpotqa" / "dev_distractor_200.jsonl",
              DATA / "hotpotqa" / "train_distractor_499.jsonl", DATA / "musique" / "train_397.jsonl"]
FORMER = HybridConfig(fusion="rrf", weights={"bm25": 1.0, "dense": 1.5}, rrf_k=10.0, adaptive=False)


def candidates() -> dict[str, HybridConfig]:
    """The fusion candidates, fixed before any number was seen (order breaks ties)."""
    out: dict[str, HybridConfig] = {"rrf k60 1:1": HybridConfig(fusion="rrf", weights={"bm25": 1.0, "dense": 1.0},
                                                                 rrf_k=60.0, adaptive=False)}
    for k in (10.0, 30.0, 60.0):
        for wd in (0.5, 0.75, 1.0, 1.5, 2.0):
            out.setdefault(f"rrf k{k:g} 1:{wd:g}", HybridConfig(fusion="rrf", weights={"bm25": 1.0, "dense": wd},
                                                                rrf_k=k, adaptive=False))
    for norm in ("minmax", "zscore"):
        for adaptive in (False, True):
            if adaptive and norm == "minmax":
                continue
            for a in (0.3, 0.4, 0.5, 0.6, 0.7):
                name = f"{norm}{' adaptive' if adaptive else ''} dense {a:g}"
                out[name] = HybridConfig(fusion=norm, adaptive=adaptive,
                                         weights={"bm25": round(1 - a, 2), "dense": a})
    return out


def _key(path: Path, depth: int) -> str:
    h = hashlib.sha1(path.read_bytes())
    h.update(f"{depth}:v1".encode())
    return h.hexdigest()[:12]


def first(path: Path, n: int | None, cache: Path) -> Path:
    """The file itself, or a copy of its first ``n`` records (a smaller file of the same kind)."""
    if not n:
        return path
    with path.open(encoding="utf-8") as fh:
        lines = [line for line, _ in zip(fh, range(n), strict=False)]
    if len(lines) < n:
        return path
    out = cache / path.parent.name / f"{path.stem}.first{n}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists():
        out.write_text("".join(lines), encoding="utf-8")
    return out


def runs_for(path: Path, cache: Path, depth: int, embedder: Any) -> dict[str, Any]:
    """BM25 and dense runs of the file's questions on a KB built from the file (cached)."""
    npz = cache / f"{path.parent.name}.{path.stem}.{_key(path, depth)}.npz"
    if not npz.exists():
        t0 = time.perf_counter()
        kb_dir = cache / f"kb.{path.parent.name}.{path.stem}"
        build_kb(path, kb_dir, method="hybrid", embedder=embedder, overwrite=True, progress=False)
        kb = KnowledgeBase.load(kb_dir, embedder=embedder)
        row_of = {pid: i for i, pid in enumerate(kb.ids())}
        items = [(q, golds) for _, q, golds in questions(path) if golds]
        qs = [q for q, _ in items]
        arrays: dict[str, np.ndarray] = {}
        for m in ("bm25", "dense"):
            ranked = kb.rank(qs, depth, m)
            rows = np.full((len(qs), depth), -1, dtype=np.int64)
            scores = np.zeros((len(qs), depth), dtype=np.float64)
            for i, r in enumerate(ranked):
                rows[i, :len(r)] = [x for x, _ in r]
                scores[i, :len(r)] = [s for _, s in r]
            arrays[f"{m}_rows"], arrays[f"{m}_scores"] = rows, scores
        gold = json.dumps([[row_of.get(g, -1) for g in golds] for _, golds in items])
        np.savez(npz, gold=np.array(gold), passages=np.array(len(kb)), **arrays)
        print(f"# {path.parent.name}/{path.name}: KB of {len(kb)} passages, {len(qs)} questions, "
              f"runs in {time.perf_counter() - t0:.0f}s", flush=True)
    z = np.load(npz)
    runs: dict[str, list[Ranked]] = {}
    for m in ("bm25", "dense"):
        rows, scores = z[f"{m}_rows"], z[f"{m}_scores"]
        runs[m] = [[(int(r), float(s)) for r, s in zip(rr, ss, strict=True) if r >= 0] for rr, ss in zip(rows, scores,
                                                                                                          strict=True)]
    return {"runs": runs, "gold": json.loads(str(z["gold"])), "passages": int(z["passages"])}


def recall(ranked: list[Ranked], gold: list[list[int]], k: int) -> tuple[float, float]:
    """(all@k, psg@k) as in ``agentrag kb eval-recall``."""
    all_found = frac = 0.0
    for r, golds in zip(ranked, gold, strict=True):
        top = {row for row, _ in r[:k]}
        found = sum(1 for g in golds if g in top)
        all_found += float(found == len(golds))
        frac += found / len(golds)
    return all_found / len(gold), frac / len(gold)


def evaluate(data: dict[str, Any], cfgs: dict[str, HybridConfig], k: int) -> dict[str, tuple[float, float]]:
    runs, gold = data["runs"], data["gold"]
    out = {m: recall(runs[m], gold, k) for m in ("bm25", "dense")}
    for name, cfg in cfgs.items():
        out[name] = recall(fuse(runs, cfg), gold, k)
    return out


def _row(role: str, f: Path, d: dict[str, Any], t: dict[str, tuple[float, float]], chosen: str) -> str:
    best = max(t["bm25"][0], t["dense"][0])
    return (f"| {role}: {f.parent.name}/{f.stem} | {len(d['gold'])} | {d['passages']} | {t['bm25'][0]:.3f} | "
            f"{t['dense'][0]:.3f} | {t['former'][0]:.3f} | {t['default'][0]:.3f} | {t[chosen][0]:.3f} | "
            f"{t[chosen][0] - best:+.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tune", type=Path, default=TUNE)
    ap.add_argument("--validate", type=Path, nargs="*", default=VALIDATION)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/agentrag_fusion"))
    ap.add_argument("--depth", type=int, default=HybridConfig().depth)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--all", action="store_true", help="also print every candidate on every file")
    ap.add_argument("--first", type=int, default=None, metavar="N",
                    help="validate on the first N questions of each validation file (a KB of their contexts)")
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    embedder = load_embedder(None)
    cands = candidates()
    methods = {"former": FORMER, "default": HybridConfig(), **cands}
    args.validate = [first(f, args.first, args.cache) for f in args.validate]
    files = [args.tune, *args.validate]
    data: dict[Path, dict[str, Any]] = {}
    table: dict[Path, dict[str, tuple[float, float]]] = {}
    chosen = ""
    rows: list[str] = []
    for f in files:  # rows printed as each file is done; the chosen candidate depends on the tune set only
        data[f] = runs_for(f, args.cache, args.depth, embedder)
        table[f] = evaluate(data[f], methods, args.k)
        if f == args.tune:
            tune = table[f]
            chosen = max(cands, key=lambda n: (tune[n][0], tune[n][1], -list(cands).index(n)))
            print(f"# chosen on the tune set: {chosen} ({cands[chosen].model_dump()})", flush=True)
        rows.append(_row("tune" if f == args.tune else "validate", f, data[f], table[f], chosen))
        print("# " + rows[-1], flush=True)
    k = args.k
    print(f"\ntune set: {args.tune.parent.name}/{args.tune.name}; chosen on it: {chosen} "
          f"({cands[chosen].model_dump()})\n")
    print(f"| set | questions | passages | bm25 all@{k} | dense all@{k} | former rrf k10 1:1.5 | "
          f"current default | chosen | chosen - best single |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    margins = [table[f][chosen][0] - max(table[f]["bm25"][0], table[f]["dense"][0]) for f in args.validate]
    if margins:
        print(f"\nworst margin of the chosen candidate over the better single method on the validation sets: "
              f"{min(margins):+.3f}")
    if args.all:
        print(f"\nall@{k} of every candidate; last column: its worst margin over the better single method on "
              "the validation sets (for the record: choosing by it would be tuning on them)\n")
        print("| candidate | " + " | ".join(f"{f.parent.name[:5]}/{f.stem}" for f in files) + " | min margin |")
        print("|---|" + "---|" * (len(files) + 1))
        for n in ["bm25", "dense", "former", *cands]:
            ms = [table[f][n][0] - max(table[f]["bm25"][0], table[f]["dense"][0]) for f in args.validate]
            print(f"| {n} | " + " | ".join(f"{table[f][n][0]:.3f}" for f in files)
                  + f" | {min(ms, default=0.0):+.3f} |")


if __name__ == "__main__":
    main()
