"""Gate checks shared by every synthesizer: lexical first (:mod:`agentrag.match`), the verifier
second (:mod:`agentrag.synth.verifier`).

Each check returns ``None`` (passed) or a reason ``"<check>: detail"``; a synthesizer's gate
module composes them for its own items. A check given ``verifier=None`` decides from strings only
(what the gate benchmark reports as "lexical only"); given a verifier LLM it asks it the questions
of meaning after the lexical checks passed. A verifier that gives no verdict raises
:class:`~agentrag.synth.verifier.VerifierUnanswered` (the item stays unfinished).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from agentrag.match import (
    FUNCTION_WORDS,
    analyse,
    containment,
    content_tokens,
    demonyms,
    find_mention,
    is_no_answer,
    mentions,
    near_duplicate,
    similarity,
    tokens,
    yes_no,
)
from agentrag.synth.verifier import verify

#: share of a document's canonical tokens found, in order, in a distractor at or above which the
#: distractor, keeping every name and number of the document, is the document again with additions
COPY_CONTAINMENT = 0.98
#: a source of fewer content tokens than this (a bare name, a short phrase) is no document a
#: distractor could copy "with additions": every document about it contains it
COPY_MIN_TOKENS = 6
#: a sentence repeated this many times makes a text degenerate
REPEATS = 3
#: below this share of distinct tokens (in a text of 40+ tokens) a text is degenerate
DISTINCT_SHARE = 0.3

_YES_NO_QUESTION = re.compile(r"^\s*(is|are|was|were|do|does|did|has|have|had|can|could|will|would|should|shall|"
                              r"may|might|must)\b", re.IGNORECASE)
_WH_QUESTION = re.compile(r"^\s*(who|whom|whose|what|which|where|when|how many|how much|in which|in what|at which|"
                          r"from which|of which|to which|for which|on which|by whom)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
#: references to earlier steps a plan or thought writes ("#2", "step 2", "sub-question 3"): never
#: a mention of an answer, so a small-number answer ("2") is not found in them
_REFERENCE = re.compile(r"#\s?\d+\b|\b(?:step|sub-?questions?|hops?|iterations?|searche?s?|questions?|items?|"
                        r"evidence|facts?|turns?|rounds?)\s+#?\d+\b|\[\d+(?:\s*,\s*\d+)*\]", re.IGNORECASE)
#: spelling-variant similarity (rapidfuzz ratio of canonical words) at or above which a word of a
#: claim counts as stated by a variant in the evidence ("director" / "directed")
VARIANT = 75
_SYNTHESIS_WORDING = re.compile(
    r"\b(?:gold(?:en)?|reference|expected|given|correct|provided|target|ground[- ]truth)\s+"
    r"(?:evidence|answers?|facts?|sentences?|passages?|paragraphs?|ind(?:ex|ices)|supports?)\b"
    r"|\b(?:you|i|we)\s+(?:already\s+)?know\s+the\s+(?:correct\s+|final\s+|right\s+)?answer\b"
    r"|\banswer\s+(?:is|was)\s+given\b|\bsupporting\s+facts?\s+(?:provided|given)\b", re.IGNORECASE)
_EXPLAIN_Q = re.compile(r"^\s*(why\b|explain\b|describe\b|how\s+come\b|how\s+(?:did|does|do|was|were|is|are|can|could)\b)"
                        r"|\b(what|which)\s+(?:is|was|are|were)\s+(?:the\s+)?(?:main\s+|primary\s+)?"
                        r"(?:reasons?|causes?|explanations?|rationale|motivations?)\b"
                        r"|\bwhat\s+(?:caused|led\s+to|made|motivated|prompted|drove)\b|\bfor\s+what\s+reason\b"
                        r"|\bin\s+what\s+way\b", re.IGNORECASE)
_EXPLAIN_A = re.compile(r"^\s*(because|due\s+to|since|as\s+a\s+result|in\s+order\s+to|so\s+that|owing\s+to|"
                        r"it\s+(?:is|was)\s+because)\b", re.IGNORECASE)


def visible(text: str, cut: int | None) -> str:
    """What an agent shown ``cut`` characters of ``text`` sees."""
    return text if cut is None else text[:cut]


def without_references(text: str) -> str:
    """``text`` without references to earlier steps ("#2", "step 2", "sub-question 3", "[1, 4]")."""
    return _REFERENCE.sub(" ", text or "")


def unstated(claim: str, evidence: Sequence[str], *, given: str = "") -> list[str]:
    """The content words of ``claim`` (canonical; not function words, not in ``given``) that no
    evidence text states, in the same form or a spelling variant ("director" for "directed")."""
    from rapidfuzz import fuzz

    asked = {t.stem for t in analyse(given)}
    have = {t.stem for e in evidence for t in analyse(e)}
    out = []
    for t in analyse(without_references(claim)):
        if t.canon in FUNCTION_WORDS or t.stem in asked or t.stem in have or t.canon in out:
            continue
        if t.canon.isdigit() or not any(fuzz.ratio(t.canon, h) >= VARIANT for h in have if h[:1] == t.canon[:1]):
            out.append(t.canon)
    return out


def claim_support(claim: str, evidence: Sequence[str], *, question: str = "", verifier: Any = None,
                  stage: str = "gate") -> str | None:
    """The evidence states ``claim`` (a sentence answering ``question``): a no-answer claim, or a
    name no evidence states, is rejected; a number no evidence states may be computed from stated
    numbers (the verifier decides; lexical only: rejected); content words no evidence states (perhaps a
    paraphrase) go to the verifier (lexical only: rejected); then the verifier judges the claim as
    a whole (role, relation)."""
    if is_no_answer(claim):
        return f"no_answer: {claim!r} says there is no answer"
    invented = invented_facts(without_references(claim), evidence, question=question)
    names = [f for f in invented if not f.isdigit()]
    computable = any(t.isdigit() for e in evidence for t in tokens(e))
    if names or (invented and (verifier is None or not computable)):
        return f"not_stated: {invented[:3]} stated by no evidence"
    missing = unstated(claim, evidence, given=f"{question} answer")
    if missing and verifier is None:
        return f"not_stated: {missing[:5]} in no evidence"
    return _verified(verifier, "supported", evidence, stage, claim=claim)


def is_yes_no_question(question: str) -> bool:
    """A question answered by yes or no ("Is ...", "Did ...", "Are both ...")."""
    return bool(_YES_NO_QUESTION.match(question or ""))


def answer_support(answer: str, evidence: Sequence[str], *, question: str = "", aliases: Iterable[str] = (),
                   cut: int | None = None, distractors: Sequence[str] = (), verifier: Any = None,
                   stage: str = "gate") -> str | None:
    """The evidence states ``answer`` for ``question``: not a no-answer; a yes/no answer only to a
    yes/no question (a judgement over the evidence, verified when a verifier is given); otherwise
    some evidence text (cut at ``cut`` characters, what the agent saw) mentions the answer or an
    alias in some written form, and the verifier agrees that it answers the question in that
    role. A number the evidence does not spell may be computed from it (the verifier decides;
    without one it is rejected)."""
    aliases = list(aliases)
    if is_no_answer(answer):
        return f"no_answer: {answer!r} says there is no answer"
    shown = [visible(e, cut) for e in evidence]
    yn = yes_no(answer)
    if yn is not None and question and not is_yes_no_question(question) and _WH_QUESTION.match(question):
        return f"yes_no: {answer!r} answers a question that asks for a value, not yes or no"
    if yn is not None:
        return _verified(verifier, "supported", shown, stage, claim=f"The answer to {question!r} is {yn}.")
    if not any(mentions(answer, e, aliases) for e in shown):
        if any(mentions(answer, e, aliases) for e in evidence):
            return f"beyond_cut: {answer!r} is stated only after the {cut} characters the agent was shown"
        if any(mentions(answer, d, aliases) for d in distractors):
            return f"distractor: {answer!r} is stated only by a distractor document"
        if _is_number(answer) and any(t.isdigit() for e in shown for t in tokens(e)) and verifier is not None:
            return _verified(verifier, "supported", shown, stage,
                             claim=f"The answer to {question!r} is {answer}, computed from numbers the evidence states.")
        return f"not_stated: {answer!r} is stated by no evidence text"
    return _verified(verifier, "role", shown, stage, answer=answer, question=question)


def is_number(text: str) -> bool:
    """A number, alone or with a unit ("81", "56 years", "1.5 km")."""
    t = tokens(text)
    return 1 <= len(t) <= 2 and t[0].replace(".", "", 1).isdigit() and (len(t) == 1 or not t[1].isdigit())


_is_number = is_number


def _verified(verifier: Any, check: str, evidence: Sequence[str], stage: str, **fields: Any) -> str | None:
    if verifier is None:
        return None
    keep, verdict, _ = verify(verifier, check, list(evidence), stage=stage, **fields)
    return None if keep else f"verifier: {check}: {verdict.reason or 'rejected'}"


def leakage(answer: str, text: str, *, question: str = "", aliases: Iterable[str] = (), seen: str = "") -> str | None:
    """``text`` (a query or sub-question) names the final ``answer`` — in any written form, or a
    distinctive part of a multi-word name — before the documents ``seen`` so far showed it. Yes/no
    answers and answers the question itself names (comparisons) cannot leak."""
    aliases = list(aliases)
    if yes_no(answer) is not None or is_no_answer(answer) or mentions(answer, question, aliases):
        return None
    found = find_mention(answer, text, aliases, partial=True)
    if found is None:
        return None
    part = found[5:] if found.startswith("part:") else None
    if part is not None and part in tokens(question):
        return None
    if seen and mentions(answer, seen, aliases, partial=part is not None):
        return None
    return f"leakage: {text!r} names the answer {answer!r} ({found}) before any document showed it"


def repeated(queries: Sequence[str]) -> str | None:
    """Two of ``queries`` (searches or sub-questions) are one text asked twice (near-duplicates)."""
    qs = [q for q in queries if q and q.strip()]
    for i in range(len(qs)):
        for j in range(i):
            if near_duplicate(qs[i], qs[j]):
                return f"repeated: {qs[i]!r} repeats {qs[j]!r}"
    return None


def distinct_count(queries: Sequence[str]) -> int:
    """How many of ``queries`` are distinct (near-duplicates counted once)."""
    kept: list[str] = []
    for q in queries:
        if q and q.strip() and not any(near_duplicate(q, k) for k in kept):
            kept.append(q)
    return len(kept)


def one_sided(entities: Sequence[str], queries: Sequence[str]) -> str | None:
    """A comparison that did not search every compared entity (in any written form)."""
    for e in entities:
        if not any(mentions(e, q) for q in queries):
            return f"one_sided: {e!r} was never searched"
    return None


def degenerate(text: str) -> str | None:
    """Degenerate text: one sentence repeated :data:`REPEATS` or more times, or a long text of few
    distinct words."""
    seen: dict[str, int] = {}
    for s in _SENTENCE.split(text or ""):
        key = " ".join(tokens(s))
        if len(key) > 8:
            seen[key] = seen.get(key, 0) + 1
            if seen[key] >= REPEATS:
                return f"degenerate: a sentence repeated {seen[key]} times"
    toks = tokens(text or "")
    if len(toks) >= 40 and len(set(toks)) / len(toks) < DISTINCT_SHARE:
        return f"degenerate: {len(set(toks))} distinct words in {len(toks)}"
    return None


def synthesis_wording(text: str) -> str | None:
    """Wording that only makes sense while synthesizing ("the reference answer", "gold evidence",
    "I already know the answer"): an agent at inference has none of them."""
    m = _SYNTHESIS_WORDING.search(text or "")
    return f"synthesis_wording: {m.group(0)!r}" if m else None


_NAME_RUN = re.compile(r"[A-Z](?:(?:\.[A-Z])+\.?|\.|[\w'\u2019-]*)(?:(?:\s+(?:of|the|de|del|da|di|du|von|van|der|la|"
                       r"le|and|&))*\s+[A-Z](?:(?:\.[A-Z])+\.?|\.|[\w'\u2019-]*))*")
_ACRONYM = re.compile(r"(?:[A-Z]\.){2,}|[A-Z]\.[A-Z]")
#: month names and abbreviations: part of a date, whose numbers carry the fact
_MONTH_WORDS = frozenset("january february march april may june july august september october november december jan "
                         "feb mar apr jun jul aug sep sept oct nov dec".split())
#: words that start sentences of a thought without naming anything
_DISCOURSE = frozenset("""found then next now so thus therefore hence first second third finally search searching step
answer according based since because however also let maybe perhaps yes no ok okay sure great good the a an this
that these those it its i we my our he she they there here what which who where when why how is are was were""".split())


#: words written before a number in a title ("Rhapsody No. 1", "Symphony Op. 9"): the number is
#: checked as a number, the name before it as a name
_NUMBER_WORDS = frozenset("no nos vol op pt part".split())


def _pieces(run: str) -> list[list[str]]:
    """The words of a run of capitalised words, split where a sentence ends inside it ("World War
    I. Now I ..."): a word ending in "." followed by a discourse word."""
    out: list[list[str]] = [[]]
    words = run.split()
    for k, w in enumerate(words):
        out[-1].append(w)
        nxt = words[k + 1] if k + 1 < len(words) else ""
        if w.endswith(".") and nxt and nxt.lower().strip(".,:'") in _DISCOURSE:
            out.append([])
    return [p for p in out if p]


def _facts(text: str) -> list[str]:
    """Checkable facts of a text, lexically: numbers and runs of capitalised words (names); a
    sentence's first word is a name only when a capitalised word follows it and it is no
    discourse word ("Found:", "Then", "I")."""
    text = text or ""
    facts: list[str] = []
    for m in _NAME_RUN.finditer(text):
        after = text[m.end():m.end() + 3]
        for n, piece in enumerate(_pieces(m.group(0))):
            last = piece[-1]
            if not _ACRONYM.search(last):
                piece[-1] = last.rstrip(".")
            words = [w for w in piece if w]
            if n + 1 == len(_pieces(m.group(0))) and words and words[-1].lower() in _NUMBER_WORDS \
                    and after.lstrip(". ")[:1].isdigit():
                words = words[:-1]
            before = text[:m.start()].rstrip() if n == 0 else "."
            initial = not before or before[-1] in ".!?:;\n\"'(" or before.endswith("...")
            if initial and words and words[0].lower().strip(".,:'") in _DISCOURSE:
                words = words[1:]
                while words and words[0].lower() in FUNCTION_WORDS:
                    words = words[1:]
            elif initial and len(words) == 1:
                continue
            if words and not (len(words) == 1 and words[0].lower().rstrip(".") in _DISCOURSE | _MONTH_WORDS):
                facts.append(" ".join(words))
    return facts


def invented_facts(text: str, evidence: Sequence[str], *, question: str = "", answer: str = "") -> list[str]:
    """The numbers and names of ``text`` that neither the evidence, the question nor the answer
    state (lexical; a paraphrased invention needs the verifier)."""
    pool = [p for p in list(evidence) + [question, answer] if p]
    known = {t for p in pool for t in tokens(p)}
    known |= {t[1:] for t in known if t[:1] == "d" and t[1:].isdigit()}  # the day of a date ("d17") states 17
    numbers = [t for t in tokens(text) if t.isdigit() and len(t) >= 2 and t not in known]
    def stated(name: str) -> bool:  # a country is also stated by its nationality adjective ("American")
        if any(mentions(name, p, demonyms(name)) for p in pool):
            return True
        parts = re.split(r"\s+(?:and|&)\s+", name)  # "Ann Lee and Bob Ray": two names joined, or one
        return len(parts) > 1 and all(stated(x) for x in parts)

    return numbers + [f for f in dict.fromkeys(_facts(text)) if not stated(f)]


def thought_problem(text: str, evidence: Sequence[str], *, question: str = "", answer: str = "",
                    verifier: Any = None, stage: str = "gate") -> str | None:
    """Why a thought may not be a training target: synthesis-only wording, degenerate repetition,
    a number or name no evidence states, or (verifier) a fact the evidence does not support."""
    reason = synthesis_wording(text) or degenerate(text)
    if reason:
        return reason
    invented = invented_facts(without_references(text), evidence, question=question, answer=answer)
    if invented:
        return f"invented: {invented[:3]} stated by no evidence"
    return _verified(verifier, "supported", evidence, stage, claim=text)


def explanation_question(question: str) -> bool:
    """A question that asks for a reason or an explanation ("Why ...", "What caused ...", "How
    did ... happen"); "How many/long/wide/heavy ..." and "What was the main purpose of ..." ask for
    a value."""
    return bool(_EXPLAIN_Q.search(question or ""))


def explanation_answer(answer: str) -> bool:
    """An answer that explains ("because it was ...", "due to the war") rather than naming an
    entity; a title that begins with such a word ("Because of Winn-Dixie", "Since U Been Gone")
    is a name: most of its words are capitalised."""
    if not _EXPLAIN_A.match(answer or ""):
        return False
    words = [w for w in re.findall(r"[A-Za-z][\w'-]*", answer) if w.lower() not in FUNCTION_WORDS]
    capitalised = sum(1 for w in words if w[:1].isupper())
    return not words or capitalised / len(words) < 0.6


def question_problem(question: str, answer: str) -> str | None:
    """An explanation question or answer (RAGShaper §3.2 asks for entity or value answers)."""
    if explanation_question(question):
        return f"explanation_question: {question!r} asks for a reason"
    if explanation_answer(answer):
        return f"explanation_answer: {answer!r} explains instead of naming"
    return None


def single_document(question: str, answer: str, documents: Sequence[str], *, verifier: Any = None,
                    stage: str = "gate") -> str | None:
    """One document alone answers the question (not multi-hop): the verifier is asked about each
    document that states the answer. Without a verifier nothing is rejected here."""
    if verifier is None:
        return None
    for i, doc in enumerate(documents):
        if mentions(answer, doc) or yes_no(answer) is not None:
            keep, verdict, _ = verify(verifier, "single_document", [doc], stage=stage, question=question, answer=answer)
            if not keep:
                return f"single_document: document {i + 1} answers the question alone ({verdict.reason})"
    return None


def _names(text: str) -> set[str]:
    """The canonical tokens of ``text``'s capitalised words that are not function or generic name words."""
    from agentrag.match.vocab import GENERIC_NAME_WORDS

    return {t.canon for t in analyse(text) if t.surface[:1].isupper() and t.canon not in FUNCTION_WORDS
            and t.canon not in GENERIC_NAME_WORDS and t.surface.lower() not in GENERIC_NAME_WORDS}


def _keeps_facts(source: str, other: str) -> bool:
    """Every name and number of ``source`` is in ``other``, as often (a fact changed where its
    name also occurs elsewhere is a changed fact)."""
    from collections import Counter

    have = Counter(t.stem for t in analyse(other))
    need = Counter(t.stem for t in analyse(source) if t.canon.isdigit() or t.surface[:1].isupper())
    return all(have[stem] >= n for stem, n in need.items())


def distractor_problem(distractor: str, source: str, *, fact: str = "", answer: str = "", verifier: Any = None,
                       stage: str = "gate", kind: str = "", definition: str = "") -> str | None:
    """Why a distractor is not what RAGShaper §3.1.2 asks for: the source again (a near-duplicate,
    or the source with additions), no cue linking it to the source (shares no distinctive word with
    it), filler (degenerate), or (verifier) it restates the true fact or is not of its declared type."""
    if near_duplicate(distractor, source):
        return f"copy: the distractor is the source again (similarity {similarity(distractor, source):.2f})"
    if (len(content_tokens(source)) >= COPY_MIN_TOKENS and containment(source, distractor) >= COPY_CONTAINMENT
            and _keeps_facts(source, distractor)):
        return "copy: the distractor is the source with additions (every fact of the source kept)"
    reason = degenerate(distractor)
    if reason:
        return f"filler: {reason}"
    names = _names(source)
    if names and not names & _names(distractor):
        return "no_cue: the distractor shares no distinctive word with its source"
    if answer and mentions(answer, distractor) and not fact:
        fact = answer
    if fact:
        reason = _verified(verifier, "restates", [distractor], stage, fact=fact)
        if reason:
            return f"restates: {reason}"
    if kind and definition:
        return _verified(verifier, "distractor_type", [distractor], stage, kind=kind, fact=fact or answer,
                         definition=definition)
    return None


__all__ = ["COPY_CONTAINMENT", "COPY_MIN_TOKENS", "is_number", "REPEATS", "DISTINCT_SHARE", "VARIANT", "visible",
           "without_references", "unstated", "claim_support", "is_yes_no_question", "answer_support",
           "leakage", "repeated", "distinct_count", "one_sided", "degenerate", "synthesis_wording", "invented_facts",
           "thought_problem", "explanation_question", "explanation_answer", "question_problem", "single_document",
           "distractor_problem"]


_WH_WORD = r"(?:what|who|whom|whose|which|where|when|how|why|is|was|are|were|did|does|do)"
_JOINED = re.compile(rf"\b(?:and|also|as well as)\b,?\s+(?:\w+\s+)?{_WH_WORD}\b|;", re.IGNORECASE)
_DOCUMENT_REFERENCE = re.compile(
    r"\b(?:according to|in|from|mentioned in|described in|given in)\s+the\s+(?:document|passage|text|article|"
    r"paragraph)s?\b|\b(?:this|the given) (?:document|passage|text|article)\b", re.IGNORECASE)


def joined_questions(question: str) -> str | None:
    """Question shape, not matching: two questions asked in one ("..., and which ...?", a ";", two
    question marks) instead of one nested in the other."""
    q = question or ""
    if q.count("?") > 1:
        return "two question marks"
    m = _JOINED.search(q)
    return f"joined by {m.group(0).strip()!r}" if m else None


def document_reference(question: str) -> str | None:
    """Question wording, not matching: a question that refers to its document ("according to the
    passage", "in this article"), which a reader of a benchmark does not have."""
    m = _DOCUMENT_REFERENCE.search(question or "")
    return f"document_reference: {m.group(0)!r}" if m else None


__all__ += ["joined_questions", "document_reference"]
