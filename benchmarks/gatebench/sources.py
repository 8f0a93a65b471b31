"""The QA items the gate benchmark mutates: the shared multi-hop files, read into one shape.

``split="train"`` reads only the training files (cases for choosing thresholds and defaults);
``split="dev"`` only the dev files (cases that report). The two never share a question.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

SHARED = Path(os.environ.get("AGENTRAG_SHARED", Path(__file__).resolve().parents[3] / "shared"))

FILES = {
    "train": (("musique", "musique/train_397.jsonl"), ("2wiki", "2wikimultihopqa/train_600.jsonl"),
              ("hotpotqa", "hotpotqa/train_distractor_499.jsonl")),
    "dev": (("2wiki", "2wikimultihopqa/dev_with_context_164.jsonl"),
            ("hotpotqa", "hotpotqa/dev_distractor_200.jsonl")),
}


@dataclass
class Doc:
    title: str
    text: str


@dataclass
class Hop:
    """One hop: its sub-question (MuSiQue, or made from a 2Wiki triple), answer and the paragraph
    that states it."""

    question: str
    answer: str
    doc: Doc
    relation: str = ""
    subject: str = ""


@dataclass
class Item:
    id: str
    dataset: str
    type: str
    question: str
    answer: str
    aliases: list[str]
    hops: list[Hop]
    gold: list[Doc]
    others: list[Doc] = field(default_factory=list)


def _musique(rec: dict) -> Item:
    paras = rec["paragraphs"]
    hops = []
    answers: list[str] = []
    for d in rec["question_decomposition"]:
        q = d["question"]
        for k, a in enumerate(answers, start=1):
            q = q.replace(f"#{k}", a)
        p = paras[d["paragraph_support_idx"]]
        hops.append(Hop(q, d["answer"], Doc(p["title"], p["paragraph_text"])))
        answers.append(d["answer"])
    gold = [Doc(p["title"], p["paragraph_text"]) for p in paras if p.get("is_supporting")]
    others = [Doc(p["title"], p["paragraph_text"]) for p in paras if not p.get("is_supporting")]
    return Item(rec["id"], "musique", f"{len(hops)}hop", rec["question"], rec["answer"],
                list(rec.get("answer_aliases") or []), hops, gold, others)


def _context(rec: dict) -> dict[str, str]:
    return {t: " ".join(s.strip() for s in sents) for t, sents in rec["context"]}


def _twowiki(rec: dict) -> Item:
    ctx = _context(rec)
    titles = list(dict.fromkeys(t for t, _ in rec["supporting_facts"]))
    hops = []
    for s, r, o in rec.get("evidences") or []:
        title = s if s in ctx else next((t for t in titles if t in ctx), titles[0] if titles else s)
        hops.append(Hop(f"What is the {r} of {s}?", o, Doc(title, ctx.get(title, "")), relation=r, subject=s))
    gold = [Doc(t, ctx[t]) for t in titles if t in ctx]
    others = [Doc(t, x) for t, x in ctx.items() if t not in titles]
    return Item(rec["_id"], "2wiki", rec["type"], rec["question"], rec["answer"], [], hops, gold, others)


def _hotpot(rec: dict) -> Item:
    ctx = _context(rec)
    titles = list(dict.fromkeys(t for t, _ in rec["supporting_facts"]))
    gold = [Doc(t, ctx[t]) for t in titles if t in ctx]
    others = [Doc(t, x) for t, x in ctx.items() if t not in titles]
    return Item(rec["_id"], "hotpotqa", rec["type"], rec["question"], rec["answer"], [], [], gold, others)


_READERS = {"musique": _musique, "2wiki": _twowiki, "hotpotqa": _hotpot}


def load_items(split: str, limit_per_file: int | None = None) -> list[Item]:
    """The items of ``split``'s files (at most ``limit_per_file`` from each), in file order."""
    out: list[Item] = []
    for dataset, rel in FILES[split]:
        path = SHARED / "data" / rel
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f):
                if limit_per_file is not None and n >= limit_per_file:
                    break
                item = _READERS[dataset](json.loads(line))
                if item.gold and item.answer.strip():
                    out.append(item)
    return out


__all__ = ["SHARED", "FILES", "Doc", "Hop", "Item", "load_items"]
