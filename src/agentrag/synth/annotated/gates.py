"""Gates of the human-annotation teacher: a path is kept only when the KB really led to it. Every
string comparison goes through the matching core (:mod:`agentrag.match`) and the shared checks
(:mod:`agentrag.synth.gates`); the teacher calls no LLM, so its gates are lexical.

Each gate returns ``None`` (passed) or a named reason ``"<gate>: detail"``; the first failing gate
names the item's rejection in the funnel.

- ``annotation``: 1 to ``max_hops`` hops, every query non-empty and free of unresolved ``#k``
  references, every hop with an answer and a supporting title;
- ``support_retrieved``: every hop's answer is stated (any written form; a country also by its
  nationality adjective, "French" for France) by a retrieved document
  of its supporting page, in the text the agent is shown (the title line and the first
  ``doc_chars`` characters), so the observation holds the fact the next hop needs. A page of the
  same title that does not state the answer does not count; an answer stated only after the cut
  is named ``beyond_cut`` (the path is dropped and counted);
- ``no_leakage``: no query names the final answer (any written form, or a distinctive part of a
  multi-word name) before the documents showed it, unless the question itself names it
  (comparisons);
- ``distinct_hops``: no hop searches the query of an earlier hop again;
- ``answer_grounded``: an observation states the final answer, or it is yes/no to a yes/no
  question, or the question names it (comparisons), and a comparison searched every entity it
  compares.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentrag.agents.tools import clip_text
from agentrag.match import demonyms, equivalent, mentions, yes_no
from agentrag.records import Hit
from agentrag.synth.annotated.teacher import Hop, SearchedHop
from agentrag.synth.gates import answer_support, is_yes_no_question, leakage, repeated, without_references
from agentrag.synth.verifier import verify

GATES = ("annotation", "support_retrieved", "no_leakage", "distinct_hops", "answer_grounded")


def shown(hit: Hit, doc_chars: int | None) -> str:
    """What the agent is shown of ``hit``: its title and its text cut at ``doc_chars``."""
    return f"{hit.title}\n{clip_text(' '.join(hit.text.split()), doc_chars)}"


def annotation_gate(hops: list[Hop], max_hops: int) -> str | None:
    if not hops:
        return "annotation: no decomposition or evidence triples"
    if len(hops) > max_hops:
        return f"annotation: {len(hops)} hops > max_hops={max_hops}"
    for i, h in enumerate(hops):
        if not h.query.strip() or "#" in h.query and without_references(h.query) != h.query:
            return f"annotation: hop {i + 1} query {h.query!r} is empty or has an unresolved reference"
        if not h.answer.strip():
            return f"annotation: hop {i + 1} has no answer"
        if not h.support:
            return f"annotation: hop {i + 1} has no supporting paragraph"
    return None


def supporting_hits(sh: SearchedHop, doc_chars: int | None,
                    view: Callable[[Hit, int | None], str] = shown) -> list[int]:
    """Indices of ``sh``'s hits from its supporting page(s) whose shown text (``view``: the react
    agent's by default) states the hop's answer."""
    return [i for i, h in enumerate(sh.hits)
            if any(equivalent(h.title, t) for t in sh.hop.support)
            and mentions(sh.hop.answer, view(h, doc_chars), demonyms(sh.hop.answer))]


def hop_support(sh: SearchedHop, doc_chars: int | None, verifier: Any = None) -> str | None:
    """Why one searched hop is not supported by what the agent is shown, or None. With a
    ``verifier`` LLM (the teacher itself calls none) it is asked whether the page states the
    answer in the hop's relation (a name of the page in another role is no support)."""
    found = supporting_hits(sh, doc_chars)
    if found and verifier is not None:
        keep, verdict, _ = verify(verifier, "role", [shown(sh.hits[i], doc_chars) for i in found], stage="gates",
                                  answer=sh.hop.answer, question=sh.hop.query)
        return None if keep else f"verifier: role: {verdict.reason or 'rejected'}"
    if found:
        return None
    pages = [h for h in sh.hits if any(equivalent(h.title, t) for t in sh.hop.support)]
    if not pages:
        return f"did not retrieve {sh.hop.support!r}"
    if any(mentions(sh.hop.answer, f"{h.title}\n{h.text}", demonyms(sh.hop.answer)) for h in pages):
        return f"beyond_cut: {sh.hop.answer!r} is stated only after the {doc_chars} characters the agent is shown"
    # not written out: a yes/no judgement or a number computed from the page (the verifier decides)
    reason = answer_support(sh.hop.answer, [shown(h, doc_chars) for h in pages], question=sh.hop.query,
                            verifier=verifier)
    if reason is None and verifier is not None:
        return None
    return f"{sh.hop.answer!r} is stated by no retrieved page of {sh.hop.support!r}"


def support_gate(searched: list[SearchedHop], doc_chars: int | None = None, verifier: Any = None) -> str | None:
    for i, sh in enumerate(searched):
        problem = hop_support(sh, doc_chars, verifier)
        if problem:
            return f"support_retrieved: hop {i + 1} ({sh.hop.query!r}) {problem}"
    return None


def leakage_gate(question: str, answer: str, searched: list[SearchedHop]) -> str | None:
    seen = ""
    for i, sh in enumerate(searched):
        reason = leakage(answer, sh.hop.query, question=question, seen=seen)
        if reason:
            return f"no_leakage: hop {i + 1} {reason}"
        seen += "\n" + sh.observation
    return None


def distinct_gate(searched: list[SearchedHop]) -> str | None:
    reason = repeated([sh.hop.query for sh in searched])
    return f"distinct_hops: {reason}" if reason else None


def grounded_gate(question: str, answer: str, searched: list[SearchedHop]) -> str | None:
    if mentions(answer, question) or (yes_no(answer) is not None and is_yes_no_question(question)):
        compared = [a for sh in searched for a in [sh.hop.query] if a]
        subjects = [t for sh in searched for t in sh.hop.support if mentions(t, question)]
        missing = [t for t in dict.fromkeys(subjects) if not any(mentions(t, q) for q in compared)]
        return f"answer_grounded: one_sided: {missing[0]!r} was never searched" if missing else None
    reason = answer_support(answer, [sh.observation for sh in searched], question=question)
    return f"answer_grounded: {reason}" if reason else None


def first_failure(question: str, answer: str, hops: list[Hop], searched: list[SearchedHop] | None,
                  max_hops: int, doc_chars: int | None = None) -> str | None:
    """The first failing gate's reason, or None when the path passes all of them (``searched``
    None: only the annotation gate, before any search)."""
    reason = annotation_gate(hops, max_hops)
    if reason or searched is None:
        return reason
    return support_gate(searched, doc_chars) or leakage_gate(question, answer, searched) or \
        distinct_gate(searched) or grounded_gate(question, answer, searched)


__all__ = ["GATES", "shown", "annotation_gate", "supporting_hits", "hop_support", "support_gate", "leakage_gate",
           "distinct_gate", "grounded_gate", "first_failure"]
