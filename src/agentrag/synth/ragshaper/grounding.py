"""Grounded QA checks (§3.2, Fig. 12): the hops of a synthesized question are counted from the
path's documents, not from what the model says.

A reasoning step is *grounded* when its quoted ``evidence`` is found in one positive document
of the path: exactly (after normalization: lower case, punctuation and articles dropped) or by
token containment, the share of the evidence's tokens that occur in the document in the same
order (longest matching blocks of ``difflib.SequenceMatcher``), at least ``threshold`` (0.8 by
default). Evidence shorter than ``MIN_EVIDENCE_TOKENS`` tokens is not a quotation and grounds
nothing. The number of hops is the number of distinct documents that ground a step; evidence
quoted from a distractor document (K~) supports no hop.

The answer checks of Fig. 12 live here too: no span of three or more answer words inside the
question, no "why"/"how" explanation as the answer, at most one sentence.
"""

from __future__ import annotations

import difflib
import re
import string
from typing import Any

from agentrag.synth.ragshaper.schema import DocRef

#: evidence with fewer tokens than this is not a quotation (one word occurs almost anywhere)
MIN_EVIDENCE_TOKENS = 3
#: question openings that ask for an explanation ("how many", "how long" ... ask for a value)
_EXPLAIN_Q = re.compile(r"^\s*(why\b|how\b(?!\s+(many|much|long|old|far|tall|big|large|often|high|deep)\b)|"
                        r"describe\b|explain\b)", re.IGNORECASE)
#: answer openings of an explanation rather than an entity or value
_EXPLAIN_A = re.compile(r"^\s*(because|due to|since|as a result|in order to|so that|by (means of|using|being)|"
                        r"it (is|was) because)\b", re.IGNORECASE)
_PUNCT = str.maketrans({c: " " for c in string.punctuation})
_ARTICLES = {"a", "an", "the"}


def tokens(text: str) -> list[str]:
    """Lower-cased words without punctuation and articles."""
    return [w for w in text.lower().translate(_PUNCT).split() if w not in _ARTICLES]


def containment(evidence: str, document: str) -> float:
    """Share of ``evidence`` tokens found in ``document`` in order (1.0 for an exact quotation)."""
    ev, doc = tokens(evidence), tokens(document)
    if not ev or not doc:
        return 0.0
    if f" {' '.join(ev)} " in f" {' '.join(doc)} ":
        return 1.0
    matcher = difflib.SequenceMatcher(None, ev, doc, autojunk=False)
    return sum(b.size for b in matcher.get_matching_blocks()) / len(ev)


def ground_steps(steps: list[dict[str, Any]], docs: list[DocRef], threshold: float = 0.8) -> list[dict[str, Any]]:
    """Per reasoning step: the best-matching positive document of the path and its containment;
    ``doc_id`` is None when no document reaches ``threshold`` (an invented hop)."""
    positives = [d for d in docs if d.distractor_type is None and d.kb != "distractor"]
    out = []
    for i, step in enumerate(steps, start=1):
        evidence = str(step.get("evidence") or "")
        best_id, best = None, 0.0
        if len(tokens(evidence)) >= MIN_EVIDENCE_TOKENS:
            for d in positives:
                score = containment(evidence, f"{d.title} {d.text}")
                if score > best:
                    best_id, best = d.id, score
        grounded = best_id is not None and best >= threshold
        out.append({"hop": step.get("hop") or i, "doc_id": best_id if grounded else None,
                    "containment": round(best, 3)})
    return out


def grounded_hops(grounding: list[dict[str, Any]]) -> int:
    """Distinct supporting documents among the grounded steps."""
    return len({g["doc_id"] for g in grounding if g["doc_id"] is not None})


def answer_span_in_question(question: str, answer: str, n: int = 3) -> str | None:
    """The first run of ``n`` or more answer words that also occurs in the question, else None."""
    a, q = tokens(answer), f" {' '.join(tokens(question))} "
    for i in range(len(a) - n + 1):
        span = " ".join(a[i:i + n])
        if f" {span} " in q:
            return span
    return None


def is_explanation(question: str, answer: str) -> bool:
    """A why/how question, or an answer that explains instead of naming a value."""
    return bool(_EXPLAIN_Q.match(question) or _EXPLAIN_A.match(answer))


__all__ = ["MIN_EVIDENCE_TOKENS", "tokens", "containment", "ground_steps", "grounded_hops",
           "answer_span_in_question", "is_explanation"]
