"""The distractor curation tool (§3.1.1, Table 1): original fact + type + guideline -> documents
that are confusable with the fact yet can be told apart from it by a careful reader."""

from __future__ import annotations

import logging
from typing import Any

from agentrag.llm.base import LLM
from agentrag.records import Message, Provenance
from agentrag.synth.common import call_json
from agentrag.synth.ragshaper.config import DISTRACTOR_TYPES, DistractorConfig
from agentrag.synth.ragshaper.schema import DistractorDoc

log = logging.getLogger(__name__)

# Our own wording of Table 1: what each type changes and the cue that still separates it.
TYPE_GUIDE: dict[str, str] = {
    "doppelganger": (
        "Perception level. Same topic and wording style as the fact, but about an adjacent edition, "
        "year, version, ID or namesake. Change exactly one hard detail and make the differing "
        "edition/date/identity explicit in the text so a careful reader can tell them apart."),
    "false_shortcut": (
        "Cognition level. Claim a direct link from the first entity to the final conclusion while "
        "skipping the intermediate step the real chain needs; use hedged, vague justification "
        "('it is widely assumed', 'reportedly') so that the claim is visibly unsupported."),
    "fragmented_puzzle": (
        "Cognition level. Give only one piece of the information (e.g. a single year or a single "
        "member of a list), locally plausible but clearly partial, so a reader who stops here "
        "would answer with an incomplete picture."),
    "subjective_fallacy": (
        "Cognition level. Written as a personal review or opinion piece with a confident tone that "
        "contains one objectively wrong core claim about the fact; the opinion framing "
        "('I feel', 'in my view') marks it as unreliable."),
}

SYSTEM = (
    "You write adversarial but fair distractor documents for a retrieval benchmark. A distractor "
    "must look relevant to the original fact and be easy to confuse with it, yet contain a cue "
    "(a date, edition, scope, hedge or opinion marker) that lets a careful reader reject it. "
    "Never copy the original fact verbatim. Write each document as a short encyclopedic or "
    "web-style paragraph (2-4 sentences) with a title. Answer with JSON only.")


def distractor_schema(n: int) -> dict[str, Any]:
    # bounded strings keep grammar-constrained output inside a small token budget
    doc = {"type": "object", "properties": {"title": {"type": "string", "maxLength": 80},
                                            "text": {"type": "string", "maxLength": 600}},
           "required": ["title", "text"]}
    return {"type": "object", "properties": {"documents": {"type": "array", "items": doc,
                                                           "minItems": n, "maxItems": n}},
            "required": ["documents"]}


def write_distractors(llm: LLM, *, original_fact: str, seed: str, distractor_type: str, guideline: str,
                      seed_id: str, node_id: str, source_passage_id: str | None,
                      cfg: DistractorConfig,
                      seed_value: int = 0) -> tuple[list[DistractorDoc], Provenance, str | None]:
    """Run the tool once. Returns (documents, provenance, error); an error leaves no documents."""
    if distractor_type not in DISTRACTOR_TYPES:
        distractor_type = "doppelganger"
    n = cfg.docs_per_call
    user = (f"Original fact:\n{original_fact}\n\nTopic of the exploration: {seed}\nDistractor type: {distractor_type}\n"
            f"What this type means: {TYPE_GUIDE[distractor_type]}\n"
            f"Guideline from the curator: {guideline or '(none)'}\n\n"
            f"Write {n} distractor document(s) of this type as "
            '{"documents": [{"title": "...", "text": "..."}]}.')
    messages = [Message(role="system", content=SYSTEM), Message(role="user", content=user)]
    obj, prov, err = call_json(llm, messages, distractor_schema(n), name="distractor_documents",
                               stage="distractor", max_tokens=cfg.max_tokens, temperature=cfg.temperature,
                               seed=seed_value, raise_retryable=True)
    if err is not None or obj is None:
        return [], prov, err or "no output"
    raw_docs = obj.get("documents")
    if not isinstance(raw_docs, list) or not raw_docs:
        return [], prov, "schema_failure: 'documents' missing or empty"
    docs: list[DistractorDoc] = []
    fact_norm = " ".join(original_fact.lower().split())
    for j, d in enumerate(raw_docs[:n]):
        if not isinstance(d, dict):
            continue
        text = str(d.get("text") or "").strip()
        title = str(d.get("title") or "").strip()
        norm = " ".join(text.lower().split())
        if not text or norm == fact_norm or any(" ".join(d.text.lower().split()) == norm for d in docs):
            log.debug("distractor %s.%s.d%d dropped: empty, a copy of the fact or a duplicate", seed_id, node_id, j)
            continue
        docs.append(DistractorDoc(id=f"{seed_id}.{node_id}.d{j}", seed_id=seed_id, node_id=node_id,
                                  distractor_type=distractor_type, title=title, text=text,
                                  original_fact=original_fact, guideline=guideline,
                                  source_passage_id=source_passage_id, provenance=prov))
    if not docs:
        return [], prov, "schema_failure: every document was empty or a copy of the fact"
    return docs, prov, None


__all__ = ["TYPE_GUIDE", "distractor_schema", "write_distractors"]
