"""Gates of the human-annotation teacher: a path is kept only when the KB really led to it.

Each gate returns ``None`` (passed) or a named reason ``"<gate>: detail"``; the first failing gate
names the item's rejection in the funnel.

- ``annotation``: 1 to ``max_hops`` hops, every query non-empty and free of unresolved ``#k``
  references, every hop with an answer and a supporting title;
- ``support_retrieved``: every hop's supporting paragraph is among the documents its query
  returned (matched by title), so the observation holds the fact the next hop needs;
- ``no_leakage``: no query names the final answer before the documents showed it (unless the
  question itself names it, as comparison questions do);
- ``answer_grounded``: the final answer is in some observation, or is yes/no, or is named in the
  question (comparisons).
"""

from __future__ import annotations

import re

from agentrag.eval.metrics import normalize_answer
from agentrag.synth.annotated.teacher import Hop, SearchedHop

GATES = ("annotation", "support_retrieved", "no_leakage", "answer_grounded")
YES_NO = {"yes", "no"}


def _norm(text: str) -> str:
    return f" {normalize_answer(text)} "


def _contains(haystack: str, needle: str) -> bool:
    n = normalize_answer(needle)
    return bool(n) and f" {n} " in _norm(haystack)


def annotation_gate(hops: list[Hop], max_hops: int) -> str | None:
    if not hops:
        return "annotation: no decomposition or evidence triples"
    if len(hops) > max_hops:
        return f"annotation: {len(hops)} hops > max_hops={max_hops}"
    for i, h in enumerate(hops):
        if not h.query.strip() or re.search(r"#\d", h.query):
            return f"annotation: hop {i + 1} query {h.query!r} is empty or has an unresolved reference"
        if not h.answer.strip():
            return f"annotation: hop {i + 1} has no answer"
        if not h.support:
            return f"annotation: hop {i + 1} has no supporting paragraph"
    return None


def support_gate(searched: list[SearchedHop]) -> str | None:
    for i, sh in enumerate(searched):
        titles = {h.title.strip().lower() for h in sh.hits}
        if not any(t.strip().lower() in titles for t in sh.hop.support):
            return f"support_retrieved: hop {i + 1} ({sh.hop.query!r}) did not retrieve {sh.hop.support!r}"
    return None


def leakage_gate(question: str, answer: str, searched: list[SearchedHop]) -> str | None:
    if normalize_answer(answer) in YES_NO or _contains(question, answer):
        return None
    seen = ""
    for i, sh in enumerate(searched):
        if _contains(sh.hop.query, answer) and not _contains(seen, answer):
            return f"no_leakage: hop {i + 1} query names the answer {answer!r} before any document showed it"
        seen += "\n" + sh.observation
    return None


def grounded_gate(question: str, answer: str, searched: list[SearchedHop]) -> str | None:
    if normalize_answer(answer) in YES_NO or _contains(question, answer):
        return None
    if any(_contains(sh.observation, answer) for sh in searched):
        return None
    return f"answer_grounded: the answer {answer!r} is in no retrieved document"


def first_failure(question: str, answer: str, hops: list[Hop], searched: list[SearchedHop] | None,
                  max_hops: int) -> str | None:
    """The first failing gate's reason, or None when the path passes all of them (``searched``
    None: only the annotation gate, before any search)."""
    reason = annotation_gate(hops, max_hops)
    if reason or searched is None:
        return reason
    return support_gate(searched) or leakage_gate(question, answer, searched) or \
        grounded_gate(question, answer, searched)


__all__ = ["GATES", "annotation_gate", "support_gate", "leakage_gate", "grounded_gate", "first_failure"]
