"""Prompts of the Tracer builder (our wording; the paper's Appendix C is not public text). The
structured replies they ask for are declared in :mod:`agentrag.synth.tracer.outputs`."""

from __future__ import annotations

from agentrag.synth.tracer.config import DOMAINS

ANNOTATE_SYSTEM = (
    "You label encyclopedia passages. Say what kind of entity the passage is about (person, place, "
    "organization, creative work, event, species, object, concept or other) and which domain it belongs to. "
    f"Domains: {', '.join(DOMAINS)}. "
    'Reply with JSON only: {"entity_type": "...", "domain": "..."}.'
)

ATOMIC_SYSTEM = (
    "You write factual single-hop questions from one encyclopedia passage. Each question must be "
    "answerable from the passage alone, name its subject explicitly (no 'he', 'it', 'this passage'), and "
    "have a short answer of 1 to 5 words: an entity, a name, a place, a date or a value with its unit, "
    "copied from the passage. Avoid answers that are only a bare number. List other common names of the answer as aliases. "
    'Reply with JSON only: {"pairs": [{"question": "...", "answer": "...", "aliases": ["..."]}]}.'
)

LINK_SYSTEM = (
    "You extend a question chain by one hop using a new passage. Choose a template:\n"
    "- inference: the new question asks about the previous answer entity (named explicitly) and is "
    "answered by the new passage;\n"
    "- comparison: the new question asks for the same attribute as the previous question, about a "
    "different entity of the same kind described in the new passage.\n"
    "The new question must be answerable from the new passage alone, with a short answer copied from it. "
    'Reply with JSON only: {"template": "inference" or "comparison", "question": "...", "answer": "...", '
    '"aliases": ["..."]}.'
)

COMPOSE_SYSTEM = (
    "You merge two questions into one natural multi-hop question.\n"
    "- inference: replace the bridge entity in the second question by a description taken from the first "
    "question, so the bridge entity is never named; the final answer is the second answer.\n"
    "- comparison: ask which of the two entities has the greater / earlier / larger value (or whether they "
    "share it); the final answer is the winning entity's name (or yes / no).\n"
    "Never write the intermediate answer into the question and never just join the two questions with 'and'. "
    'Reply with JSON only: {"question": "...", "answer": "...", "aliases": ["..."]}.'
)

AUDIT_SYSTEM = (
    "You audit a multi-hop question built from atomic facts, each taken from the document shown with it. "
    "Read the documents, not only the facts. Reject the question when one of these holds, and name it:\n"
    "- false_entity_link: an inference link joins two different entities (namesakes, or a name that the "
    "documents show refers to something else in one of them), or the bridge is not the entity the next "
    "document describes;\n"
    "- trivial_concatenation: the question only strings the sub-questions together (asks two things, or "
    "restates the first question and then asks the second) instead of nesting one inside the other;\n"
    "- no_common_basis: a comparison of different attributes, units or kinds of entity;\n"
    "- answer_not_supported: the final answer does not follow from the documents;\n"
    "- other: any other reason the question is not a sound multi-hop question.\n"
    'Reply with JSON only: {"reason": "<one sentence>", "failure": "none" or one of the names above, '
    '"valid": true or false}.'
)

ANSWER_CLOSED_SYSTEM = (
    "Answer the question from your own knowledge with a short answer (a name, entity, date or value). "
    'If you do not know, answer "unknown". Reply with JSON only: {"answer": "..."}.'
)
ANSWER_DOCS_SYSTEM = (
    "Answer the question using only the documents given. Reply with a short answer (a name, entity, date or "
    'value). If the documents do not contain what is needed, answer "unknown". '
    'Reply with JSON only: {"answer": "..."}.'
)


def doc_block(docs: list[tuple[str, str]]) -> str:
    """Documents as numbered ``[i] Title\\ntext`` blocks (each text as shown: whole, or the window
    :meth:`~agentrag.synth.tracer.oracle.Oracle.view` chose)."""
    return "\n\n".join(f"[{i}] {title}\n{text}" for i, (title, text) in enumerate(docs, start=1))


__all__ = ["ANNOTATE_SYSTEM", "ATOMIC_SYSTEM", "LINK_SYSTEM", "COMPOSE_SYSTEM", "AUDIT_SYSTEM",
           "ANSWER_CLOSED_SYSTEM", "ANSWER_DOCS_SYSTEM", "doc_block"]
