"""The distractor curation tool (§3.1.1, Table 1): original fact + type + guideline -> documents
that are confusable with the fact yet can be told apart from it by a careful reader.

Each written document passes :func:`check_distractor` (on :func:`agentrag.synth.gates.distractor_problem`)
or is dropped with its reason: a near-duplicate of the original fact (or of a document kept
before it in the same call), the fact with additions, filler, no cue shared with the fact, and
-- asked of the verifier -- a restatement of the true fact or a document that is not of its
declared type (:data:`TYPE_DEFINITIONS`)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, create_model

from agentrag.llm.base import LLM
from agentrag.match import near_duplicate
from agentrag.records import Message, Provenance
from agentrag.synth.common import call_json
from agentrag.synth.gates import distractor_problem
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

# What the verifier is asked a document of each type is (Table 1, in our words).
TYPE_DEFINITIONS: dict[str, str] = {
    "doppelganger": ("it is about the same topic as the fact but a different edition, version, date, ID or "
                     "namesake, stated explicitly, so that one detail differs from the fact."),
    "false_shortcut": ("it claims a direct link from the first entity to the final conclusion, skipping an "
                       "intermediate step of the real chain, with vague, hedged or wrong justification."),
    "fragmented_puzzle": ("it gives only one part of the information the fact needs (one year, one member, one "
                          "piece), locally plausible but incomplete."),
    "subjective_fallacy": ("it is written as an opinion or review in a subjective, confident tone and makes an "
                           "objectively wrong core claim about the fact."),
}

SYSTEM = (
    "You write adversarial but fair distractor documents for a retrieval benchmark. A distractor "
    "must look relevant to the original fact and be easy to confuse with it, yet contain a cue "
    "(a date, edition, scope, hedge or opinion marker) that lets a careful reader reject it. "
    "Never copy the original fact verbatim. Write each document as a short encyclopedic or "
    "web-style paragraph (2-4 sentences) with a title. Answer with JSON only.")


class DocText(BaseModel):
    """One distractor document (bounded so constrained output stays inside a small token budget)."""

    model_config = ConfigDict(extra="ignore")

    title: str = Field(default="", max_length=80)
    text: str = Field(max_length=600)


class DistractorDocuments(BaseModel):
    """The tool's reply: ``docs_per_call`` documents (the count is in the schema of
    :func:`distractor_model`)."""

    model_config = ConfigDict(extra="ignore")

    documents: list[DocText] = Field(min_length=1, max_length=5)


@functools.lru_cache(maxsize=8)
def distractor_model(n: int) -> type[DistractorDocuments]:
    """:class:`DistractorDocuments` asking for exactly ``n`` documents."""
    return create_model("DistractorDocuments", __base__=DistractorDocuments,
                        documents=(list[DocText], Field(min_length=1, max_length=5,
                                                        json_schema_extra={"minItems": n, "maxItems": n})))


def check_distractor(text: str, original_fact: str, distractor_type: str, *, kept: Sequence[str] = (),
                     verifier: LLM | None = None) -> str | None:
    """Why a written document is no distractor of ``distractor_type`` for ``original_fact``
    (None: keep it): empty, a near-duplicate of a document ``kept`` before it, or what
    :func:`agentrag.synth.gates.distractor_problem` finds (a copy of the fact, the fact with
    additions, filler, no cue; with a ``verifier``: it restates the fact, or it is not of its type)."""
    if not text.strip():
        return "empty: the document has no text"
    if any(near_duplicate(text, k) for k in kept):
        return "duplicate: the same document twice in one call"
    body = _without_title(original_fact)
    if body != original_fact:  # the fact's text without its title line ("Title\ntext", "Title: text")
        reason = distractor_problem(text, body)
        if reason and reason.startswith("copy"):
            return reason
    return distractor_problem(text, original_fact, fact=original_fact, verifier=verifier, stage="distractor",
                              kind=distractor_type.replace("_", " "),
                              definition=TYPE_DEFINITIONS.get(distractor_type, ""))


def _without_title(fact: str) -> str:
    """``fact`` without a leading title line (``"Title\ntext"``) or title prefix (``"Title: text"``,
    how the curator's latest document becomes the original fact)."""
    head, sep, rest = fact.partition("\n")
    if sep and rest.strip():
        return rest
    head, sep, rest = fact.partition(": ")
    if sep and rest.strip() and len(head.split()) <= 8 and not any(c in head for c in ".!?"):
        return rest
    return fact


def write_distractors(llm: LLM, *, original_fact: str, seed: str, distractor_type: str, guideline: str,
                      seed_id: str, node_id: str, source_passage_id: str | None,
                      cfg: DistractorConfig, seed_value: int = 0, verifier: LLM | None = None,
                      rejected: list[str] | None = None) -> tuple[list[DistractorDoc], Provenance, str | None]:
    """Run the tool once. Returns (documents, provenance, error); an error leaves no documents.
    Each document is checked (:func:`check_distractor`, asking ``verifier`` when given); the
    reason of every dropped one is appended to ``rejected`` as ``"<type>: <reason>"``."""
    if distractor_type not in DISTRACTOR_TYPES:
        distractor_type = "doppelganger"
    n = cfg.docs_per_call
    user = (f"Original fact:\n{original_fact}\n\nTopic of the exploration: {seed}\nDistractor type: {distractor_type}\n"
            f"What this type means: {TYPE_GUIDE[distractor_type]}\n"
            f"Guideline from the curator: {guideline or '(none)'}\n\n"
            f"Write {n} distractor document(s) of this type as "
            '{"documents": [{"title": "...", "text": "..."}]}.')
    messages = [Message(role="system", content=SYSTEM), Message(role="user", content=user)]
    obj, prov, err = call_json(llm, messages, distractor_model(n), name="distractor_documents",
                               stage="distractor", max_tokens=cfg.max_tokens, temperature=cfg.temperature,
                               seed=seed_value)
    if obj is None:
        err = err or "no output"
        return [], prov, f"schema_failure: {err}" if err.startswith("parse_error") else err
    docs: list[DistractorDoc] = []
    reasons: list[str] = []
    for j, d in enumerate(obj.documents[:n]):
        text, title = d.text.strip(), d.title.strip()
        reason = check_distractor(text, original_fact, distractor_type, kept=[k.text for k in docs], verifier=verifier)
        if reason:
            log.debug("distractor %s.%s.d%d dropped: %s", seed_id, node_id, j, reason)
            reasons.append(f"{distractor_type}: {reason}")
            continue
        docs.append(DistractorDoc(id=f"{seed_id}.{node_id}.d{j}", seed_id=seed_id, node_id=node_id,
                                  distractor_type=distractor_type, title=title, text=text,
                                  original_fact=original_fact, guideline=guideline,
                                  source_passage_id=source_passage_id, provenance=prov))
    if rejected is not None:
        rejected.extend(reasons)
    if not docs:
        kinds = sorted({r.split(": ")[1] for r in reasons})
        return [], prov, f"rejected: every document failed the distractor checks ({', '.join(kinds)})"
    return docs, prov, None


__all__ = ["TYPE_GUIDE", "TYPE_DEFINITIONS", "check_distractor", "DocText", "DistractorDocuments", "distractor_model", "write_distractors"]
