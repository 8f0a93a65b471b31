"""QA synthesis (§3.2, Eq. 6) from a selected path, and the rejection rules.

The generator sees the path's observations, actions and intents (negative documents marked as
such) and reverse-engineers a question that needs the whole chain. A result is rejected, with
the reason recorded, by the lexical checks (on the matching core) and then the verifier's questions
(:func:`qa_problem`); docs/ragshaper.md lists every reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentrag.errors import ParseError
from agentrag.llm.base import LLM
from agentrag.llm.structured import validate_structured
from agentrag.match import (
    FUNCTION_WORDS,
    analyse,
    find_mention,
    is_no_answer,
    mentions,
    sentences,
    tokens,
    yes_no,
)
from agentrag.records import Message
from agentrag.synth.common import call_json
from agentrag.synth.gates import (
    answer_support,
    is_number,
    question_problem,
    single_document,
    visible,
)
from agentrag.synth.ragshaper.config import QAConfig
from agentrag.synth.ragshaper.grounding import (
    MIN_CONTENT_WORDS,
    answer_is_a_choice,
    answer_span_in_question,
    answering_document,
    doc_text,
    ground_steps,
    grounded_docs,
    grounded_hops,
    is_positive,
)
from agentrag.synth.ragshaper.schema import DocRef, PathRecord, QARecord, TreeNode
from agentrag.synth.verifier import verify

SYSTEM = (
    "You turn an exploration record into one hard but fair question-answer pair.\n"
    "Question: a natural, self-contained factual question of at most two sentences whose answer "
    "is one specific fact (a name, date, place, number or yes/no). No 'how', 'why' or 'describe' "
    "questions. It must need at least three dependent hops, each hop using what the previous one "
    "found (a chain, not a checklist of independent facts). It must not contain the answer and "
    "must not state the asked attribute outright. Never mention documents, searches, steps or "
    "the exploration.\n"
    "Negative documents: if the record contains negative documents, word the question so that a "
    "careless reader could be misled by at least one of them, while the true answer stays "
    "supported by the positive evidence.\n"
    "Answer: a short phrase naming one entity or value, at most one sentence, no filler.\n"
    "Also give reasoning_steps (one per hop: the fact, the evidence copied word for word from one "
    "evidence document of the record, the output of the hop) and negative_aspect (for each negative document used: its dimension, the "
    "misleading claim, how to disambiguate it, and the distracting text). Reply with JSON only.")


class ReasoningStep(BaseModel):
    """One hop of the chain: the fact, the evidence quoted from a path document, its output."""

    model_config = ConfigDict(extra="ignore")

    hop: int | None = None
    fact: str = Field(default="", max_length=200)
    evidence: str = Field(default="", max_length=240)
    output: str = Field(default="", max_length=80)


class NegativeAspect(BaseModel):
    """How one negative (distractor) document of the path can mislead, and how to tell it apart."""

    model_config = ConfigDict(extra="ignore")

    dimension: Literal["doppelganger", "false_shortcut", "fragmented_puzzle", "subjective_fallacy"]
    misleading_claim: str = Field(default="", max_length=200)
    disambiguation: str = Field(default="", max_length=200)
    distraction_text: str = Field(default="", max_length=240)


class QAPair(BaseModel):
    """The Eq. 6 output; strings and lists are bounded so constrained decoding terminates."""

    model_config = ConfigDict(extra="ignore")

    question: str = Field(max_length=300)
    answer: str = Field(max_length=300)
    reasoning_steps: list[ReasoningStep] = Field(max_length=6)
    negative_aspect: list[NegativeAspect] = Field(default_factory=list, max_length=3)


#: characters of each document the QA writer is shown (:func:`render_for_qa`): an answer stated
#: only after them is not what the writer read
QA_DOC_CHARS = 500


def render_for_qa(seed: str, nodes: list[TreeNode], max_chars: int = QA_DOC_CHARS) -> str:
    """Eq. 6 input: (o_1, a_1, i_1, ..., o_N, a_N, i_N) of the path."""
    lines = [f"Seed entity: {seed}"]
    for i, n in enumerate(nodes[1:], start=1):
        if n.action is None:
            continue
        args = ", ".join(f"{k}={str(v)[:120]!r}" for k, v in n.action.arguments.items() if k != "original_fact")
        lines.append(f"\nStep {i}. action: {n.action.name}({args})\nintent: {n.intent}")
        for d in n.docs:
            tag = f"NEGATIVE document ({d.distractor_type})" if d.distractor_type else "evidence"
            lines.append(f"- {tag}: [{d.title}] {d.text[:max_chars]}")
        if not n.docs:
            lines.append(f"- observation: {n.observation[:max_chars]}")
    return "\n".join(lines)


def answer_in_question(question: str, answer: str) -> bool:
    """The question names the answer in some written form (:func:`leak_problem`)."""
    return leak_problem(question, answer) is not None


def sentence_count(text: str) -> int:
    """Sentences of ``text`` (:func:`agentrag.match.sentences`: "St. Lysa" is one)."""
    return len(sentences(text))


def _joined(answer: str) -> bool:
    """The answer joins words with "and", "&", "/" or a comma: maybe two entities (the verifier decides)."""
    return "and" in tokens(answer) or any(c in answer for c in "&/,;")


def form_problem(q: str, a: str, cfg: QAConfig) -> str | None:
    """The question and the answer as texts (no LLM call): the question names no written form of
    the answer (unless it offers it as an alternative), asks for no explanation, and the answer is
    one short sentence of at most ``cfg.max_answer_words`` words naming, not explaining."""
    return leak_problem(q, a) or question_type_problem(q, a, cfg)


def leak_problem(q: str, a: str) -> str | None:
    """The question names the answer: any written form of it (:func:`agentrag.match.find_mention`:
    case, possessive, diacritics, abbreviations, numbers), a span of three answer tokens, or a
    distinctive first or last word of a multi-word answer written as a name of its own in the
    question ("Lee" for "Ann Lee"). Not when the question offers the answer as one of its
    alternatives ("X or Y?"); a shared word that is a common noun ("What is the pyramid ..." for
    "Transamerica Pyramid") or part of another name of the question ("Qaleh Now-e Khaleseh" for
    "Qaleh Now Rural District") is no leak."""
    if answer_is_a_choice(q, a) or yes_no(a) is not None or is_no_answer(a):
        return None
    found = find_mention(a, q)
    if found is None:
        part = find_mention(a, q, partial=True)
        if part is not None and _alone_as_a_name(part[5:], q):
            found = part
    if found is not None:
        return f"answer_in_question: the question names the answer {a!r} ({found})"
    span = answer_span_in_question(q, a)
    if span is not None:
        return f"answer_in_question: the span {span!r} of the answer is in the question"
    return None


def _alone_as_a_name(part: str, q: str) -> bool:
    """``part`` (a canonical token) is written capitalised in ``q`` and is not inside a longer run
    of capitalised words (another name)."""
    toks = analyse(q)

    def capitalised_next(i: int, step: int) -> bool:  # over "of", "the" ...: "Number of the Beast"
        j = i + step
        while 0 <= j < len(toks) and toks[j].canon in FUNCTION_WORDS and not toks[j].surface[:1].isupper():
            j += step
        return 0 < j < len(toks) and toks[j].surface[:1].isupper()  # a question's first word is no name

    return any(t.canon == part and t.surface[:1].isupper() and not capitalised_next(i, -1)
               and not capitalised_next(i, 1) for i, t in enumerate(toks))


def question_type_problem(q: str, a: str, cfg: QAConfig) -> str | None:
    """Fig. 12's question and answer types: no explanation question or answer
    (:func:`agentrag.synth.gates.question_problem`: "How wide", "What was the main purpose" and
    titles such as "Because of Winn-Dixie" pass), one sentence (an abbreviation's period ends
    none), at most ``cfg.max_answer_words`` words."""
    problem = question_problem(q, a)
    if problem:
        return problem
    if sentence_count(a) > 1:
        return "answer_too_long: more than one sentence"
    if len(a.split()) > cfg.max_answer_words:
        return f"answer_too_long: {len(a.split())} words > {cfg.max_answer_words}"
    return None


def answer_problem(q: str, a: str, docs: list[DocRef], *, cut: int | None = None, aliases: Sequence[str] = (),
                   verifier: LLM | None = None, verified_later: bool = False) -> str | None:
    """The answer is what the path's main-KB documents state (cut at ``cut`` characters, what the
    writer read): stated by one of them, never only by a distractor; a yes/no answer only to a
    yes/no question; an alternative the question offers is a judgement (the verifier's; kept
    without one); a number computed from stated numbers is kept only when the verifier agrees.
    With a ``verifier``: the answer is stated in the role the question asks, and is one entity
    (not two joined). ``verified_later``: a lexical pass whose verifier questions come after."""
    full = [doc_text(d) for d in docs if is_positive(d)]
    # what the writer was shown: each document's title and the first ``cut`` characters of its text
    positives = [doc_text(d.model_copy(update={"text": visible(d.text, cut)})) for d in docs if is_positive(d)]
    if answer_is_a_choice(q, a):
        if verifier is None:
            return None
        keep, verdict, _ = verify(verifier, "supported", positives, stage="qa", claim=f"The answer to {q!r} is {a}.")
        return None if keep else f"verifier: supported: {verdict.reason or 'rejected'}"
    negatives = [doc_text(d) for d in docs if not is_positive(d)]
    stated = answer_support(a, positives, question=q, aliases=aliases, distractors=negatives)
    if stated and stated.startswith("not_stated") and cut is not None and any(mentions(a, t, aliases) for t in full):
        stated = f"beyond_cut: {a!r} is stated only after the {cut} characters of its document the writer was shown"
    computed = stated is not None and stated.startswith("not_stated") and is_number(a) and _states_numbers(positives)
    if stated and not (computed and (verifier is not None or verified_later)):
        return stated  # a number the path does not state is kept only when the verifier computes it
    if verifier is None:
        return None
    reason = answer_support(a, positives, question=q, aliases=aliases, distractors=negatives, verifier=verifier,
                            stage="qa")
    if reason:
        return reason
    if _joined(a):
        keep, verdict, _ = verify(verifier, "one_answer", [a], stage="qa", answer=a, question=q)
        if not keep:
            return f"verifier: one_answer: {verdict.reason or 'two entities joined'}"
    return None


def dependence_problem(q: str, a: str, hop_docs: list[DocRef], docs: list[DocRef], min_hops: int, *,
                       verifier: LLM | None = None) -> str | None:
    """The hops depend on each other (§3.2: the question "strictly requires the information
    sequence found in the path"): no main-KB document of ``docs`` states the answer and the
    question's words (lexical, :func:`.grounding.answering_document`); with a ``verifier``, no
    document answers the question alone, and at least ``min_hops`` of the ``hop_docs`` (the
    documents the reasoning steps quote) are each needed."""
    alone = answering_document(q, a, docs)
    if alone is not None:
        return (f"single_document: {alone.id} ({alone.title!r}) states the answer and the question's words: "
                "it answers the question alone")
    if verifier is None:
        return None
    reason = single_document(q, a, [doc_text(d) for d in docs if is_positive(d)], verifier=verifier, stage="qa")
    if reason:
        return f"verifier: {reason}"
    needed = 0
    for d in hop_docs:
        others = [f"OTHER DOCUMENT: {doc_text(o)}" for o in hop_docs if o.id != d.id]
        keep, _, _ = verify(verifier, "needed", [f"THE DOCUMENT: {doc_text(d)}", *others], stage="qa",
                            question=q, answer=a)
        needed += keep
    if needed < min_hops:
        return (f"verifier: needed: {needed} of {len(hop_docs)} grounded hop documents are needed to answer "
                f"< {min_hops} dependent hops")
    return None


def hop_problem(steps: list[dict[str, Any]], cfg: QAConfig, docs: list[DocRef]) -> tuple[str | None, list[dict[str, Any]]]:
    """At least ``cfg.min_hops`` hops grounded in distinct main-KB documents of the path
    (:func:`.grounding.ground_steps`). Returns (reason or None, per-step grounding)."""
    grounding = ground_steps(steps, docs, cfg.evidence_match)
    hops = grounded_hops(grounding)
    if hops < cfg.min_hops:
        generic = sum(1 for g in grounding if g.get("generic"))
        note = f"; {generic} step(s) quoted only a generic phrase or a title" if generic else ""
        return (f"too_few_hops: {hops} grounded hop(s) (distinct path documents quoted with containment "
                f">= {cfg.evidence_match} and >= {MIN_CONTENT_WORDS} content words) < {cfg.min_hops}; "
                f"the model claimed {len(steps)}{note}"), grounding
    return None, grounding


def _states_numbers(texts: list[str]) -> bool:
    return any(t.isdigit() for e in texts for t in tokens(e))


def qa_problem(q: str, a: str, steps: list[dict[str, Any]], cfg: QAConfig, docs: list[DocRef],
               verifier: LLM | None = None, cut: int | None = QA_DOC_CHARS) -> tuple[str | None, list[dict[str, Any]]]:
    """Every check of a QA pair, the lexical ones first (:func:`form_problem`,
    :func:`answer_problem`, :func:`hop_problem`, :func:`dependence_problem` without the
    verifier), then the verifier's questions (the answer's role and count, the single-document
    shortcut, each hop needed). Returns (reason or None, per-step grounding)."""
    reason = form_problem(q, a, cfg) or answer_problem(q, a, docs, cut=cut, verified_later=verifier is not None)
    if reason:
        return reason, []
    reason, grounding = hop_problem(steps, cfg, docs)
    by_id = {d.id: d for d in docs if is_positive(d)}
    hop_docs = [by_id[i] for i in grounded_docs(grounding) if i in by_id]
    reason = reason or dependence_problem(q, a, hop_docs, docs, cfg.min_hops)
    if reason is None and verifier is not None:
        reason = (answer_problem(q, a, docs, cut=cut, verifier=verifier)
                  or dependence_problem(q, a, hop_docs, docs, cfg.min_hops, verifier=verifier))
    return reason, grounding


def check_qa(obj: QAPair | dict[str, Any] | None, cfg: QAConfig, docs: list[DocRef] | None = None,
             verifier: LLM | None = None) -> tuple[str | None, list[dict[str, Any]]]:
    """(rejection reason or None, per-step grounding) for a generated QA pair (a decoded object
    is validated as :class:`QAPair` first). The hops are counted against ``docs``, the documents
    of the path (none given: no hop is grounded); see :func:`qa_problem`."""
    if obj is None:
        return "schema_failure: no JSON object", []
    if not isinstance(obj, QAPair):
        try:
            obj = validate_structured(obj, QAPair)
        except ParseError as exc:
            return f"schema_failure: {exc}", []
    q, a = obj.question, obj.answer
    if not q.strip():
        return "schema_failure: 'question' missing or empty", []
    if not a.strip():
        return "schema_failure: 'answer' missing or empty", []
    return qa_problem(q, a, [s.model_dump() for s in obj.reasoning_steps], cfg, docs or [], verifier)


def _cut_off(raw: str) -> bool:
    """The output ends inside its JSON object (cut off at ``max_tokens``). ``call_json`` says so
    itself when nothing parses; the tolerant parser may still find an inner object, which then
    fails validation, so the cut is named here."""
    start = raw.find("{")
    if start < 0:
        return False
    try:
        json.loads(raw[start:])
    except json.JSONDecodeError as exc:
        return exc.msg.startswith("Unterminated string") or exc.pos >= len(raw[start:].rstrip())
    return False


def synthesize_qa(llm: LLM, path: PathRecord, nodes: list[TreeNode], cfg: QAConfig,
                  seed: int = 0, verifier: LLM | None = None) -> QARecord:
    """One QA record for ``path``: accepted, or rejected with the reason (output that is not a
    valid :class:`QAPair`, or a request over the context window, included); ``verifier`` asks the
    questions of meaning (:func:`check_qa`; None: the lexical checks only). Every other LLM
    failure raises (an outage leaves the path unfinished; a 401/404 stops the run)."""
    start = time.monotonic()
    messages = [Message(role="system", content=SYSTEM),
                Message(role="user", content=render_for_qa(path.seed, nodes) +
                        "\n\nWrite the question-answer pair as JSON.")]
    obj, prov, err = call_json(llm, messages, QAPair, name="qa_pair", stage="qa",
                               max_tokens=cfg.max_tokens, temperature=cfg.temperature, seed=seed)
    grounding: list[dict[str, Any]] = []
    if err is not None and err.startswith("parse_error") and _cut_off(prov.raw_output or ""):
        err = f"parse_error: output cut off at max_tokens={cfg.max_tokens} before the JSON object closed"
    reason = err
    if err is None:
        reason, grounding = check_qa(obj, cfg, [d for n in nodes for d in n.docs], verifier)
    if err is not None and err.startswith("parse_error"):
        reason = f"schema_failure: {err}"
    return QARecord(
        id=f"{path.id}-qa", path_id=path.id, seed_id=path.seed_id,
        status="rejected" if reason else "accepted", reason=reason,
        question=obj.question.strip() if obj else "", answer=obj.answer.strip() if obj else "",
        reasoning_steps=[s.model_dump() for s in obj.reasoning_steps] if obj else [],
        negative_aspect=[s.model_dump() for s in obj.negative_aspect] if obj else [],
        grounding=grounding,
        elapsed=time.monotonic() - start, provenance=prov)


__all__ = ["QAPair", "ReasoningStep", "NegativeAspect", "render_for_qa", "check_qa", "answer_in_question", "answer_is_a_choice",
           "sentence_count", "QA_DOC_CHARS", "form_problem", "leak_problem", "question_type_problem", "answer_problem",
           "hop_problem", "dependence_problem", "qa_problem", "synthesize_qa"]
