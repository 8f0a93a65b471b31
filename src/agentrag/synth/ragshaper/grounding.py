"""Grounded QA checks (§3.2, Fig. 12): the hops of a synthesized question are counted from the
path's documents, not from what the model says.

A reasoning step is *grounded* when its quoted ``evidence`` is found in one positive document
of the path: exactly (after normalization, :func:`tokens`) or by token containment, the share
of the evidence's tokens that occur in the document in the same order (longest matching blocks
of ``difflib.SequenceMatcher``), at least ``threshold`` (0.8 by default) -- **and** the matched
tokens include at least ``MIN_CONTENT_WORDS`` (3) content words, words that are not function
words (:data:`FUNCTION_WORDS`: articles, prepositions, pronouns, auxiliaries, conjunctions). A
generic phrase such as "town founded in" (two content words) occurs in many documents and
grounds nothing; "founded in 1820 by Ott Brem" does. The number of hops is the number of
distinct documents that ground a step; evidence quoted from a distractor document (K~)
supports no hop.

The answer checks of Fig. 12 live here too: no span of three or more answer words inside the
question, compared on normalized forms ("&" and "and", "U.S." and "US", "St." and "Saint" are
the same), no question asking for a reason or explanation, no explanation as the answer.
"""

from __future__ import annotations

import difflib
import re
import string
from typing import Any

from agentrag.synth.ragshaper.schema import DocRef

#: evidence with fewer tokens than this is not a quotation (one word occurs almost anywhere)
MIN_EVIDENCE_TOKENS = 3
#: content words a grounding match must contain: fewer is a generic phrase, not a quotation
MIN_CONTENT_WORDS = 3
#: words that carry no content of their own (a match made of them grounds nothing)
FUNCTION_WORDS = frozenset("""
a an the of in on at to for from by with without into onto over under about after before during
since until than as and or but nor so yet if then that which who whom whose what when where why how
is are was were be been being am has have had do does did will would shall should can could may
might must it its he she they them his her their this these those there here not no also only
very more most such some any each other all both one de la le von van
""".split())
#: question openings or phrasings that ask for an explanation ("how many", "how long" ... ask for a value)
_EXPLAIN_Q = re.compile(r"^\s*(why\b|how\b(?!\s+(many|much|long|old|far|tall|big|large|often|high|deep)\b)|"
                        r"describe\b|explain\b)|\b(what|which)\s+(is|was|are|were)\s+(the\s+)?(main\s+|primary\s+)?"
                        r"(reasons?|causes?|explanations?|rationale|motivations?|purpose)\b|"
                        r"\bfor\s+what\s+(reason|purpose)\b|\bhow\s+come\b|\bin\s+what\s+way\b",
                        re.IGNORECASE)
#: answer openings of an explanation rather than an entity or value
_EXPLAIN_A = re.compile(r"^\s*(because|due to|since|as a result|in order to|so that|by (means of|using|being)|"
                        r"it (is|was) because)\b", re.IGNORECASE)
_PUNCT = str.maketrans({c: " " for c in string.punctuation})
_ARTICLES = {"a", "an", "the"}
#: multi-word names and their abbreviation (applied to lower-cased text)
_PHRASES = ((re.compile(r"\bunited states of america\b|\bunited states\b|\busa\b"), "us"),
            (re.compile(r"\bunited kingdom\b"), "uk"))
#: single-word forms and their abbreviation ("Saint" and "St." are the same word)
_WORDS = {"saint": "st", "mount": "mt", "fort": "ft", "company": "co", "corporation": "corp",
          "incorporated": "inc", "limited": "ltd", "brothers": "bros", "doctor": "dr", "number": "no"}


def normalize(text: str) -> str:
    """Lower case; "&" as "and"; dotted abbreviations closed up ("U.S." -> "us"), apostrophes
    dropped, digit groups joined ("1,200" -> "1200"); other punctuation as spaces; "United
    States"/"USA" -> "us", "Saint" -> "st" and the like."""
    t = text.lower().replace("&", " and ")
    t = re.sub(r"(?<=\b\w)\.(?=\w\b\.?)", "", t)  # u.s. -> us. ; d.c. -> dc.
    t = re.sub(r"(?<=\d),(?=\d{3}\b)", "", t).replace("'", "").replace("\u2019", "")
    for pattern, short in _PHRASES:
        t = pattern.sub(short, t)
    return " ".join(_WORDS.get(w, w) for w in t.translate(_PUNCT).split())


def tokens(text: str) -> list[str]:
    """Normalized words (:func:`normalize`) without articles."""
    return [w for w in normalize(text).split() if w not in _ARTICLES]


def content_words(words: list[str]) -> list[str]:
    """The words of ``words`` that are not function words."""
    return [w for w in words if w not in FUNCTION_WORDS]


def containment(evidence: str, document: str) -> float:
    """Share of ``evidence`` tokens found in ``document`` in order (1.0 for an exact quotation)."""
    ev, doc = tokens(evidence), tokens(document)
    if not ev or not doc:
        return 0.0
    if f" {' '.join(ev)} " in f" {' '.join(doc)} ":
        return 1.0
    matcher = difflib.SequenceMatcher(None, ev, doc, autojunk=False)
    return sum(b.size for b in matcher.get_matching_blocks()) / len(ev)


def matched_content_words(evidence: str, document: str) -> int:
    """How many content words of ``evidence`` are part of its in-order match with ``document``."""
    ev, doc = tokens(evidence), tokens(document)
    matcher = difflib.SequenceMatcher(None, ev, doc, autojunk=False)
    return sum(len(content_words(ev[b.a:b.a + b.size])) for b in matcher.get_matching_blocks())


def ground_steps(steps: list[dict[str, Any]], docs: list[DocRef], threshold: float = 0.8) -> list[dict[str, Any]]:
    """Per reasoning step: the best-matching positive document of the path, its containment and
    the content words matched; ``doc_id`` is None when no document reaches ``threshold`` with at
    least ``MIN_CONTENT_WORDS`` content words matched (an invented hop or a generic phrase)."""
    positives = [d for d in docs if d.distractor_type is None and d.kb != "distractor"]
    out = []
    for i, step in enumerate(steps, start=1):
        evidence = str(step.get("evidence") or "")
        best_id, best, words = None, 0.0, 0
        if len(tokens(evidence)) >= MIN_EVIDENCE_TOKENS:
            for d in positives:
                text = f"{d.title} {d.text}"
                score = containment(evidence, text)
                n = matched_content_words(evidence, text) if score > 0 else 0
                if score > 0 and (score, n) > (best, words):
                    best_id, best, words = d.id, score, n
        grounded = best_id is not None and best >= threshold and words >= MIN_CONTENT_WORDS
        entry: dict[str, Any] = {"hop": step.get("hop") or i, "doc_id": best_id if grounded else None,
                                 "containment": round(best, 3), "content_words": words}
        if best_id is not None and best >= threshold and not grounded:
            entry["generic"] = True  # found, but too few content words to be a quotation
        out.append(entry)
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


def explanation_question(question: str) -> bool:
    """A question that asks for a reason or an explanation: why / how (not "how many", "how
    long" ...) / describe / explain, "what is the reason (cause, purpose ...)", "for what reason",
    "how come", "in what way"."""
    return bool(_EXPLAIN_Q.search(question))


def explanation_answer(answer: str) -> bool:
    """An answer that explains ("because ...", "due to ...", "in order to ...") instead of naming a value."""
    return bool(_EXPLAIN_A.match(answer))


def is_explanation(question: str, answer: str) -> bool:
    """An explanation question or an explanation answer."""
    return explanation_question(question) or explanation_answer(answer)


__all__ = ["MIN_EVIDENCE_TOKENS", "MIN_CONTENT_WORDS", "FUNCTION_WORDS", "normalize", "tokens", "content_words",
           "containment", "matched_content_words", "ground_steps", "grounded_hops", "answer_span_in_question",
           "explanation_question", "explanation_answer", "is_explanation"]
