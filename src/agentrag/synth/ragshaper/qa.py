"""QA synthesis (§3.2, Eq. 6) from a selected path, and the rejection rules.

The generator sees the path's observations, actions and intents (negative documents marked as
such) and reverse-engineers a question that needs the whole chain. A result is rejected, with
the reason recorded, for: schema failure, the answer text inside the question, fewer than
``min_hops`` dependent hops with evidence, or an answer longer than one sentence.
"""

from __future__ import annotations

import re
import string
import time
from typing import Any

from agentrag.llm.base import LLM
from agentrag.records import Message
from agentrag.synth.common import call_json
from agentrag.synth.ragshaper.config import DISTRACTOR_TYPES, QAConfig
from agentrag.synth.ragshaper.schema import PathRecord, QARecord, TreeNode

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
    "Also give reasoning_steps (one per hop: the fact, a quoted evidence snippet, the output of "
    "the hop) and negative_aspect (for each negative document used: its dimension, the "
    "misleading claim, how to disambiguate it, and the distracting text). Reply with JSON only.")


def qa_schema(max_hops: int = 6) -> dict[str, Any]:
    """The Eq. 6 output schema; strings and lists are bounded so constrained decoding terminates."""
    def text(n: int) -> dict[str, Any]:
        return {"type": "string", "maxLength": n}

    step = {"type": "object", "properties": {"hop": {"type": "integer"}, "fact": text(200),
                                             "evidence": text(240), "output": text(80)},
            "required": ["hop", "fact", "evidence", "output"]}
    neg = {"type": "object", "properties": {"dimension": {"type": "string", "enum": list(DISTRACTOR_TYPES)},
                                            "misleading_claim": text(200), "disambiguation": text(200),
                                            "distraction_text": text(240)},
           "required": ["dimension", "misleading_claim", "disambiguation", "distraction_text"]}
    return {"type": "object",
            "properties": {"question": text(300), "answer": text(120),
                           "reasoning_steps": {"type": "array", "items": step, "maxItems": max_hops},
                           "negative_aspect": {"type": "array", "items": neg, "maxItems": 3}},
            "required": ["question", "answer", "reasoning_steps", "negative_aspect"]}


def render_for_qa(seed: str, nodes: list[TreeNode], max_chars: int = 500) -> str:
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


_PUNCT = str.maketrans({c: " " for c in string.punctuation})


def _norm(s: str) -> str:
    words = s.lower().translate(_PUNCT).split()
    return " ".join(w for w in words if w not in {"a", "an", "the"})


def answer_in_question(question: str, answer: str) -> bool:
    a = _norm(answer)
    return bool(a) and f" {a} " in f" {_norm(question)} "


_SENTENCE_END = re.compile(r"(?<![A-Z])[.!?]\s+(?=[A-Z0-9])")


def sentence_count(text: str) -> int:
    return len([s for s in _SENTENCE_END.split(text.strip()) if s.strip()])


def check_qa(obj: dict[str, Any] | None, cfg: QAConfig) -> str | None:
    """The rejection reason for a generated QA object, or None when it is accepted."""
    if obj is None:
        return "schema_failure: no JSON object"
    q, a, steps = obj.get("question"), obj.get("answer"), obj.get("reasoning_steps")
    if not isinstance(q, str) or not q.strip():
        return "schema_failure: 'question' missing or empty"
    if not isinstance(a, str) or not a.strip():
        return "schema_failure: 'answer' missing or empty"
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        return "schema_failure: 'reasoning_steps' is not a list of objects"
    if not isinstance(obj.get("negative_aspect", []), list):
        return "schema_failure: 'negative_aspect' is not a list"
    if answer_in_question(q, a):
        return "answer_in_question"
    hops = [s for s in steps if str(s.get("fact") or "").strip() and str(s.get("evidence") or "").strip()]
    if len(hops) < cfg.min_hops:
        return f"too_few_hops: {len(hops)} hop(s) with evidence < {cfg.min_hops}"
    if sentence_count(a) > 1 or len(a.split()) > cfg.max_answer_words:
        return "answer_too_long"
    return None


def synthesize_qa(llm: LLM, path: PathRecord, nodes: list[TreeNode], cfg: QAConfig) -> QARecord:
    """One QA record for ``path``: accepted, or rejected with the reason (never raises)."""
    start = time.monotonic()
    messages = [Message(role="system", content=SYSTEM),
                Message(role="user", content=render_for_qa(path.seed, nodes) +
                        "\n\nWrite the question-answer pair as JSON.")]
    obj, prov, err = call_json(llm, messages, qa_schema(), name="qa_pair", stage="qa",
                               max_tokens=cfg.max_tokens, temperature=cfg.temperature)
    reason = err if err is not None else check_qa(obj, cfg)
    if err is not None and err.startswith("parse_error"):
        reason = f"schema_failure: {err}"
    o = obj or {}
    return QARecord(
        id=f"{path.id}-qa", path_id=path.id, seed_id=path.seed_id,
        status="rejected" if reason else "accepted", reason=reason,
        question=str(o.get("question") or "").strip(), answer=str(o.get("answer") or "").strip(),
        reasoning_steps=[s for s in o.get("reasoning_steps") or [] if isinstance(s, dict)],
        negative_aspect=[s for s in o.get("negative_aspect") or [] if isinstance(s, dict)],
        elapsed=time.monotonic() - start, provenance=prov)


__all__ = ["qa_schema", "render_for_qa", "check_qa", "answer_in_question", "sentence_count", "synthesize_qa"]
