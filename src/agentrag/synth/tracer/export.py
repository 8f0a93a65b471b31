"""Exports: the per-hop chain records and the benchmark as FlashRAG QA jsonl.

``chains.jsonl`` keeps every chain hop by hop (Appendix A: atomic question and answer, document id
and text, composed question and answer, aliases, template, every check). ``benchmark.jsonl`` has
one item per chain and verified hop count L >= 2, in FlashRAG form::

    {"id": "<chain>-<L>hop", "question": ..., "golden_answers": [answer, *aliases],
     "metadata": {"hops": L, "type": "inference" | "comparison", "supporting_doc_ids": [...],
                  "supporting_titles": [...], "lower_hop_questions": [{"level", "question",
                  "golden_answers"}, ...], "chain_id": ..., "domain": ..., "source": "agentrag-tracer"}}

``lower_hop_questions`` are the chain's own questions at levels 1..L-1 (what
:func:`agentrag.eval.hops.lower_hop_items` reads for MaxD). ``benchmark_<L>hop.jsonl`` holds the
L-hop items only. Only hops whose every gate passed are exported (:func:`audit_exports` checks it).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentrag.records import QAItem, read_jsonl, write_jsonl
from agentrag.synth.tracer.schema import Chain, HopRecord


def benchmark_item(chain: Chain, level: int) -> QAItem:
    hops = chain.hops[:level]
    top = hops[-1]
    meta: dict[str, Any] = {
        "hops": level, "type": chain.template, "chain_id": chain.id, "domain": chain.doc_domain,
        "supporting_doc_ids": [h.doc_id for h in hops], "supporting_titles": [h.doc_title for h in hops],
        "templates": [h.template for h in hops],
        "lower_hop_questions": [{"level": h.level, "question": h.question, "golden_answers": h.golds}
                                for h in hops[:-1]],
        "source": "agentrag-tracer",
    }
    return QAItem(id=f"{chain.id}-{level}hop", question=top.question, golden_answers=top.golds, metadata=meta)


def _flashrag(item: QAItem) -> dict[str, Any]:
    return {"id": item.id, "question": item.question, "golden_answers": item.golden_answers,
            "metadata": item.metadata}


def export_benchmark(chains: Sequence[Chain], out_dir: str | Path) -> dict[str, Any]:
    """Write ``chains.jsonl``, ``benchmark.jsonl`` and ``benchmark_<L>hop.jsonl``; returns counts."""
    out = Path(out_dir)
    write_jsonl(out / "chains.jsonl", chains)
    items = [benchmark_item(c, level) for c in chains for level in range(2, c.depth + 1)
             if all(h.verified for h in c.hops[:level])]
    files: dict[str, int] = {}
    for name, subset in [("benchmark.jsonl", items)] + [
            (f"benchmark_{h}hop.jsonl", [i for i in items if i.metadata["hops"] == h]) for h in (2, 3, 4)]:
        tmp = out / (name + ".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            for i in subset:
                fh.write(json.dumps(_flashrag(i), ensure_ascii=False) + "\n")
        tmp.replace(out / name)
        files[name] = len(subset)
    by = Counter((i.metadata["hops"], i.metadata["type"]) for i in items)
    return {"files": files, "items": len(items),
            "by_hops_type": {f"{h}hop/{t}": n for (h, t), n in sorted(by.items())}}


def audit_exports(run_dir: str | Path) -> list[str]:
    """Every exported item against the stage records: a list of violations (empty when clean).

    An item violates when its chain's hop at some level <= its hop count has no ``verified`` hop
    record, or that hop has a failed check, or its question/answer differ from the record.
    """
    run = Path(run_dir)
    verified: dict[tuple[str, int], Any] = {}
    for path in sorted(run.glob("hop[0-9].jsonl")):
        for rec in read_jsonl(path, HopRecord):
            if rec.status == "verified" and rec.hop is not None:
                verified[(rec.chain_id, rec.level)] = rec.hop
    problems: list[str] = []
    for path in sorted(run.glob("benchmark*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            meta = item["metadata"]
            for level in range(2, int(meta["hops"]) + 1):
                hop = verified.get((meta["chain_id"], level))
                if hop is None:
                    problems.append(f"{path.name}: {item['id']}: hop {level} has no verified record")
                    continue
                failed = [c.name for c in hop.checks if c.passed is not True]
                if failed or not hop.verified:
                    problems.append(f"{path.name}: {item['id']}: hop {level} failed {failed}")
                if level == meta["hops"] and (hop.question != item["question"] or hop.answer != item["golden_answers"][0]):
                    problems.append(f"{path.name}: {item['id']}: question/answer differ from the hop record")
    return problems


__all__ = ["benchmark_item", "export_benchmark", "audit_exports"]
