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
No gold is a no-answer string (the matching core's vocabulary): such an alias is left out, an item
with such an answer at any level is dropped, and both are counted (``no_answer`` in the counts).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from agentrag.records import QAItem, dump_record, read_jsonl
from agentrag.runs import replace_if_changed
from agentrag.synth.tracer.oracle import is_no_answer, real_golds
from agentrag.synth.tracer.schema import AtomicPair, AtomicRecord, Chain, Check, Hop, HopRecord


def benchmark_item(chain: Chain, level: int) -> QAItem:
    """The benchmark row of ``chain`` at ``level`` hops; golds that are no-answer strings (the
    matching core's vocabulary) are left out of every level's ``golden_answers``."""
    hops = chain.hops[:level]
    top = hops[-1]
    meta: dict[str, Any] = {
        "hops": level, "type": chain.template, "chain_id": chain.id, "domain": chain.doc_domain,
        "supporting_doc_ids": [h.doc_id for h in hops], "supporting_titles": [h.doc_title for h in hops],
        "templates": [h.template for h in hops],
        "lower_hop_questions": [{"level": h.level, "question": h.question, "golden_answers": real_golds(h.golds)}
                                for h in hops[:-1]],
        "source": "agentrag-tracer",
    }
    return QAItem(id=f"{chain.id}-{level}hop", question=top.question, golden_answers=real_golds(top.golds),
                  metadata=meta)


def exportable(hops: Sequence[Hop]) -> bool:
    """Every level's answer is an answer: not a no-answer string, and some gold left (the item is
    dropped, and counted, otherwise)."""
    return all(not is_no_answer(h.answer) and real_golds(h.golds) for h in hops)


def _no_answer_golds(hops: Sequence[Hop]) -> int:
    return sum(len(h.golds) - len(real_golds(h.golds)) for h in hops)


def _flashrag(item: QAItem) -> dict[str, Any]:
    return {"id": item.id, "question": item.question, "golden_answers": item.golden_answers,
            "metadata": item.metadata}


def export_benchmark(chains: Iterable[Chain], out_dir: str | Path) -> dict[str, Any]:
    """Write ``chains.jsonl``, ``benchmark.jsonl`` and ``benchmark_<L>hop.jsonl`` in one pass over
    ``chains`` (each chain is written and dropped: memory holds counters); returns counts."""
    out = Path(out_dir)
    names = ["chains.jsonl", "benchmark.jsonl", *(f"benchmark_{h}hop.jsonl" for h in (2, 3, 4))]
    files = dict.fromkeys(names[1:], 0)
    by: Counter[tuple[int, str]] = Counter()
    no_answer = {"items_dropped": 0, "golds_removed": 0}
    with ExitStack() as stack:
        fh = {name: stack.enter_context((out / (name + ".tmp")).open("w", encoding="utf-8")) for name in names}
        for c in chains:
            fh["chains.jsonl"].write(dump_record(c) + "\n")
            for level in range(2, c.depth + 1):
                if not all(h.verified for h in c.hops[:level]):
                    continue
                if not exportable(c.hops[:level]):
                    no_answer["items_dropped"] += 1  # a level whose answer says there is none
                    continue
                no_answer["golds_removed"] += _no_answer_golds(c.hops[level - 1:level])
                item = benchmark_item(c, level)
                line = json.dumps(_flashrag(item), ensure_ascii=False) + "\n"
                for name in ("benchmark.jsonl", f"benchmark_{level}hop.jsonl"):
                    if name in fh:
                        fh[name].write(line)
                        files[name] += 1
                by[(level, item.metadata["type"])] += 1
    for name in names:
        replace_if_changed(out / (name + ".tmp"), out / name)
    return {"files": files, "items": files["benchmark.jsonl"],
            "by_hops_type": {f"{h}hop/{t}": n for (h, t), n in sorted(by.items())}, "no_answer": no_answer}


def _atomic_seeds(run: Path) -> dict[str, AtomicPair]:
    path = run / "atomic.jsonl"
    if not path.is_file():
        return {}
    return {p.id: p for rec in read_jsonl(path, AtomicRecord) for p in rec.pairs}


def _level_problems(checks: Sequence[Check], answer: str, passed: bool) -> list[str]:
    out = [c.name for c in checks if c.passed is not True]
    if not passed and not out:
        out.append("not verified")
    if is_no_answer(answer):
        out.append(f"empty answer {answer!r}")
    return out


def audit_exports(run_dir: str | Path) -> list[str]:
    """Every exported item against the stage records: a list of violations (empty when clean).

    Every level 1..L of the item's chain is re-checked: level 1 must be an accepted atomic pair of
    ``atomic.jsonl`` whose every filter passed, each level >= 2 a ``verified`` hop record whose every
    check passed; no level's answer, and none of the item's golds, may be empty or a no-answer
    phrase; the item's question/answer must equal the top hop's.
    """
    run = Path(run_dir)
    verified: dict[tuple[str, int], Any] = {}
    for path in sorted(run.glob("hop[0-9].jsonl")):
        for rec in read_jsonl(path, HopRecord):
            if rec.status == "verified" and rec.hop is not None:
                verified[(rec.chain_id, rec.level)] = rec.hop
    seeds = _atomic_seeds(run)
    problems: list[str] = []
    for path in sorted(run.glob("benchmark*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            meta, where = item["metadata"], f"{path.name}: {item['id']}"
            if not real_golds(list(item["golden_answers"])):
                problems.append(f"{where}: golden answers {item['golden_answers']!r} are empty or no answer")
            seed = seeds.get(meta["chain_id"])
            if seed is None or seed.status != "accepted":
                problems.append(f"{where}: hop 1 has no accepted atomic pair")
            else:
                bad = _level_problems(seed.checks, seed.answer, True)
                if bad:
                    problems.append(f"{where}: hop 1 failed {bad}")
            for level in range(2, int(meta["hops"]) + 1):
                hop = verified.get((meta["chain_id"], level))
                if hop is None:
                    problems.append(f"{where}: hop {level} has no verified record")
                    continue
                bad = _level_problems(hop.checks, hop.answer, hop.verified)
                if bad:
                    problems.append(f"{where}: hop {level} failed {bad}")
                if level == meta["hops"] and (hop.question != item["question"] or hop.answer != item["golden_answers"][0]):
                    problems.append(f"{where}: question/answer differ from the hop record")
    return problems


__all__ = ["benchmark_item", "exportable", "export_benchmark", "audit_exports"]
