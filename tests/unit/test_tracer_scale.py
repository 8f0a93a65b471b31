"""Tracer at many documents (issue 27, part 3): chains are assembled from the stage files one at a
time (:func:`iter_chains`, an offset index instead of the records) and exported in one pass; the
outputs are the same as the list-based code's (the reference copied below) on a scripted run."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tracer_support import PASSAGES, judge_llm, run_config, world_llm

from agentrag.records import QAItem, dump_record
from agentrag.runs import JsonlStore
from agentrag.synth.tracer import run_tracer
from agentrag.synth.tracer.chains import iter_chains
from agentrag.synth.tracer.export import _flashrag, benchmark_item, export_benchmark
from agentrag.synth.tracer.oracle import is_no_answer, real_golds
from agentrag.synth.tracer.pipeline import seed_hop
from agentrag.synth.tracer.report import ChainShape, tracer_counts
from agentrag.synth.tracer.schema import AtomicRecord, Chain, DocRecord, HopRecord
from agentrag.testing import FakeRetriever


def assemble_chains(docs: Iterable[DocRecord], atomic: Iterable[AtomicRecord],
                    hops: dict[int, Iterable[HopRecord]]) -> list[Chain]:
    """The list-based code the stages used before ``iter_chains`` (the reference): every chain
    with its verified hops, assembled from the stage records, all in memory."""
    by_doc = {d.id: d for d in docs}
    hop_recs = {level: {r.chain_id: r for r in recs} for level, recs in hops.items()}
    out: list[Chain] = []
    for rec in atomic:
        doc = by_doc.get(rec.doc_id)
        if doc is None:
            continue
        for pair in rec.pairs:
            if pair.status != "accepted":
                continue
            chain = [seed_hop(doc, pair)]
            for level in sorted(hop_recs):
                r = hop_recs[level].get(pair.id)
                if r is None or r.status != "verified" or r.hop is None:
                    break
                chain.append(r.hop)
            out.append(Chain(id=pair.id, doc_domain=doc.domain, hops=chain))
    return out


EXPORTS = ["chains.jsonl", "benchmark.jsonl", "benchmark_2hop.jsonl", "benchmark_3hop.jsonl", "benchmark_4hop.jsonl"]


def reference_export(chains: list[Chain], out: Path) -> dict[str, Any]:
    """The list-based export before the streaming one (same files, same return value)."""
    (out / "chains.jsonl").write_text("".join(dump_record(c) + "\n" for c in chains), encoding="utf-8")
    items: list[QAItem] = [benchmark_item(c, level) for c in chains for level in range(2, c.depth + 1)
                           if all(h.verified and not is_no_answer(h.answer) for h in c.hops[:level])]
    files: dict[str, int] = {}
    for name, subset in [("benchmark.jsonl", items)] + [
            (f"benchmark_{h}hop.jsonl", [i for i in items if i.metadata["hops"] == h]) for h in (2, 3, 4)]:
        (out / name).write_text("".join(json.dumps(_flashrag(i), ensure_ascii=False) + "\n" for i in subset),
                                encoding="utf-8")
        files[name] = len(subset)
    by = Counter((i.metadata["hops"], i.metadata["type"]) for i in items)
    levels = [(c, level) for c in chains for level in range(2, c.depth + 1) if all(h.verified for h in c.hops[:level])]
    dropped = sum(1 for c, level in levels if any(is_no_answer(h.answer) or not real_golds(h.golds)
                                                  for h in c.hops[:level]))
    removed = sum(len(c.hops[level - 1].golds) - len(real_golds(c.hops[level - 1].golds)) for c, level in levels
                  if all(not is_no_answer(h.answer) and real_golds(h.golds) for h in c.hops[:level]))
    return {"files": files, "items": len(items),
            "by_hops_type": {f"{h}hop/{t}": n for (h, t), n in sorted(by.items())},
            "no_answer": {"items_dropped": dropped, "golds_removed": removed}}


def scripted_run(out: Path, n: int = 12) -> dict[str, Any]:
    """The benchmark's Tracer workload (benchmarks/synth_scale.py) at ``n`` documents."""
    copies = [PASSAGES[0].model_copy(update={"id": f"{PASSAGES[0].id}-{i}"}) for i in range(n - 4)]
    cfg = run_config(out)
    cfg.docs = n
    return run_tracer(cfg, out, llm=world_llm(), judge=judge_llm(), kb=FakeRetriever(PASSAGES),
                      passages=[*PASSAGES[:4], *copies])


def stores(run: Path) -> tuple[list[DocRecord], JsonlStore[AtomicRecord], dict[int, JsonlStore[HopRecord]]]:
    docs = [d for d in JsonlStore(run / "docs.jsonl", DocRecord) if d.status == "ok"]
    hops = {level: JsonlStore(run / f"hop{level}.jsonl", HopRecord) for level in (2, 3, 4)}
    return docs, JsonlStore(run / "atomic.jsonl", AtomicRecord), hops


def test_streamed_chains_exports_and_counts_equal_the_list_based_ones(tmp_path: Path) -> None:
    run = tmp_path / "run"
    metrics = scripted_run(run)
    docs, atomic, hops = stores(run)
    want = assemble_chains(docs, atomic, dict(hops))
    got = list(iter_chains(docs, atomic, {level: s.path for level, s in hops.items()}))
    assert got == want
    assert max(c.depth for c in want) == 4, "the scripted run should build 4-hop chains"

    ref_dir, new_dir = tmp_path / "ref", tmp_path / "new"
    ref_dir.mkdir()
    new_dir.mkdir()
    shapes: list[ChainShape] = []
    assert export_benchmark(ChainShape.noting(iter(got), shapes), new_dir) == reference_export(want, ref_dir)
    for name in EXPORTS:
        ref = (ref_dir / name).read_bytes()
        assert (new_dir / name).read_bytes() == ref, name
        assert (run / name).read_bytes() == ref, name  # what the run itself wrote
    assert sorted(p.name for p in new_dir.iterdir()) == sorted(EXPORTS)  # no temporary file left

    exported = reference_export(want, ref_dir)
    args = (JsonlStore(run / "docs.jsonl", DocRecord), docs, atomic, dict(hops))
    assert tracer_counts(*args, shapes, exported, {}) == tracer_counts(*args, want, exported, {})
    assert metrics["per_hop_by_type"] == tracer_counts(*args, want, exported, {})[1]["per_hop_by_type"]


def test_first_record_of_an_id_counts_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    """As JsonlStore reads a hop file: a later duplicate of a record id is ignored (here a failed
    record turned verified), a torn last line is skipped; the chains equal the list-based ones."""
    run = tmp_path / "run"
    scripted_run(run, n=6)
    docs, atomic, hops = stores(run)  # before the file is changed (a store repairs a torn line)
    path = run / "hop3.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    failed = next((ln for ln in lines if '"status":"failed"' in ln), None)
    verified = next(ln for ln in lines if '"status":"verified"' in ln)
    extra = [verified.replace('"question":"', '"question":"CHANGED ', 1)]  # a later duplicate: ignored
    assert extra[0] != verified
    if failed is not None:
        extra.append(failed.replace('"status":"failed"', '"status":"verified"', 1))
    with path.open("a", encoding="utf-8") as fh:
        fh.writelines(extra)
        fh.write(verified.rstrip("\n")[:40])  # torn
    hops[3] = JsonlStore.__new__(JsonlStore)  # read the file as it is, without the store's repair
    hops[3].path, hops[3].model, hops[3].key = path, HopRecord, lambda r: r.id
    got = list(iter_chains(docs, atomic, {level: run / f"hop{level}.jsonl" for level in (2, 3, 4)}))
    assert got == assemble_chains(docs, atomic, dict(hops))


def test_extend_stage_reads_only_the_chains_it_extends(tmp_path: Path) -> None:
    """With ``want``, a chain that is not wanted has no hop read back (its hops stay on disk)."""
    run = tmp_path / "run"
    scripted_run(run, n=6)
    docs, atomic, hops = stores(run)
    files = {level: s.path for level, s in hops.items()}
    seen: list[tuple[str, int]] = []

    def none(cid: str, depth: int) -> bool:
        seen.append((cid, depth))
        return False

    assert list(iter_chains(docs, atomic, files, none)) == []
    want = assemble_chains(docs, atomic, dict(hops))
    assert seen == [(c.id, c.depth) for c in want]  # the depth comes from the index alone
