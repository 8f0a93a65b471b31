"""What a synthesized question's path shows (§3.2, Fig. 12), read from the path's documents and
never from what the model says. Every comparison goes through the matching core
(:mod:`agentrag.match`: canonical tokens, written forms folded away).

- A reasoning step is *grounded* when its quoted ``evidence`` is found in the **text** of one
  positive (main-KB) document of the path: :func:`agentrag.match.containment` (the share of the
  evidence's canonical tokens found in the document in order) at least ``threshold`` (0.8 by
  default), **and** the matched tokens include at least :data:`MIN_CONTENT_WORDS` (3) content
  words that are not words of the document's title. A generic phrase ("town founded in") or a
  snippet of a title ("Ott Brem merchant" in the document "Ott Brem") grounds nothing; "founded
  in 1820 by the merchant Ott Brem" does. Evidence quoted from a distractor (K~) supports no hop.
- :func:`answering_document`: a positive document that states the answer and covers the
  question's content words (:data:`SINGLE_DOCUMENT_COVERAGE`), i.e. one document answers the
  question alone (the lexical test before the verifier's).
- :func:`answer_span_in_question` and :func:`answer_is_a_choice`: the answer inside the question
  (a span of three answer words), and the comparison exception ("X or Y?" answered "Y").
"""

from __future__ import annotations

from typing import Any

from agentrag.match import FUNCTION_WORDS, containment, content_tokens, mentions, stems, tokens
from agentrag.synth.ragshaper.schema import DocRef

#: evidence with fewer tokens than this is not a quotation (one word occurs almost anywhere)
MIN_EVIDENCE_TOKENS = 3
#: content words (not function words, not words of the document's title) a grounding match must
#: contain: fewer is a generic phrase or a title, not a quotation
MIN_CONTENT_WORDS = 3
#: share of the question's content tokens that one answer-stating document must contain to answer
#: the question alone (lexically; below it the verifier decides)
SINGLE_DOCUMENT_COVERAGE = 0.8


def is_positive(doc: DocRef) -> bool:
    """A main-KB document (not a distractor of K~)."""
    return doc.distractor_type is None and doc.kb != "distractor"


def doc_text(doc: DocRef) -> str:
    """The document as the agent reads it: title and text."""
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text


def matched_content_words(evidence: str, document: str, title: str = "") -> int:
    """How many content words of ``evidence`` (not function words, not words of ``title``) are
    part of its in-order match with ``document`` (canonical tokens)."""
    from rapidfuzz.distance import LCSseq

    ev, doc = stems(evidence), stems(document)
    skip = FUNCTION_WORDS | set(stems(title))
    return sum(1 for op in LCSseq.opcodes(ev, doc) if op.tag == "equal"
               for w in ev[op.src_start:op.src_end] if w not in skip)


def ground_steps(steps: list[dict[str, Any]], docs: list[DocRef], threshold: float = 0.8) -> list[dict[str, Any]]:
    """Per reasoning step: the best-matching positive document of the path, its containment and
    the content words matched; ``doc_id`` is None when no document reaches ``threshold`` with at
    least :data:`MIN_CONTENT_WORDS` content words matched (an invented hop, a generic phrase or a
    title)."""
    positives = [d for d in docs if is_positive(d)]
    out = []
    for i, step in enumerate(steps, start=1):
        evidence = str(step.get("evidence") or "")
        best_id, best, words = None, 0.0, 0
        if len(tokens(evidence)) >= MIN_EVIDENCE_TOKENS:
            for d in positives:
                score = containment(evidence, d.text)
                n = matched_content_words(evidence, d.text, d.title) if score > 0 else 0
                if score > 0 and (score, n) > (best, words):
                    best_id, best, words = d.id, score, n
        grounded = best_id is not None and best >= threshold and words >= MIN_CONTENT_WORDS
        entry: dict[str, Any] = {"hop": step.get("hop") or i, "doc_id": best_id if grounded else None,
                                 "containment": round(best, 3), "content_words": words}
        if best_id is not None and best >= threshold and not grounded:
            entry["generic"] = True  # found, but too few content words to be a quotation
        out.append(entry)
    return out


def grounded_docs(grounding: list[dict[str, Any]]) -> list[str]:
    """Distinct documents among the grounded steps, in step order."""
    return list(dict.fromkeys(g["doc_id"] for g in grounding if g["doc_id"] is not None))


def grounded_hops(grounding: list[dict[str, Any]]) -> int:
    """Distinct supporting documents among the grounded steps."""
    return len(grounded_docs(grounding))


def answer_span_in_question(question: str, answer: str, n: int = 3) -> str | None:
    """The first run of ``n`` or more answer tokens that also occurs in the question, else None."""
    a, q = tokens(answer), f" {' '.join(tokens(question))} "
    for i in range(len(a) - n + 1):
        span = " ".join(a[i:i + n])
        if f" {span} " in q:
            return span
    return None


def answer_is_a_choice(question: str, answer: str) -> bool:
    """The question offers alternatives and the answer is one of them ("Which opened first, X or
    Y?" -> "Y"; "in 1899, 1901 or 1905?" -> "1901"): the answer is in the question by design."""
    a, q = tokens(answer), tokens(question)
    if not a or "or" not in q:
        return False
    n = len(a)
    for i in range(len(q) - n + 1):
        if q[i:i + n] == a:
            if q[i - 1:i] == ["or"] or "or" in q[i + n:i + n + 2]:
                return True
    return False


def answering_document(question: str, answer: str, docs: list[DocRef]) -> DocRef | None:
    """A positive document that states ``answer`` and contains at least
    :data:`SINGLE_DOCUMENT_COVERAGE` of the question's content tokens: it answers the question
    alone. None when no document does (lexically; the verifier asks about the rest)."""
    wanted = set(content_tokens(question)) - set(content_tokens(answer))
    if len(wanted) < 2:
        return None
    for d in docs:
        text = doc_text(d)
        if is_positive(d) and mentions(answer, text):
            have = set(tokens(text))
            if len(wanted & have) / len(wanted) >= SINGLE_DOCUMENT_COVERAGE:
                return d
    return None


__all__ = ["MIN_EVIDENCE_TOKENS", "MIN_CONTENT_WORDS", "SINGLE_DOCUMENT_COVERAGE", "is_positive", "doc_text",
           "matched_content_words", "ground_steps", "grounded_docs", "grounded_hops", "answer_span_in_question",
           "answer_is_a_choice", "answering_document"]
