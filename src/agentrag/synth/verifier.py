"""The verifier: questions of meaning that a gate cannot decide from strings.

Gates check strings first (:mod:`agentrag.match`); what remains is a question of meaning — does
the evidence put this person in this role, does a document alone answer the question, does a
distractor restate the true fact — and goes to the synthesizer's verifier LLM with a typed reply
(:class:`Verdict`), as the papers verify with an LLM too.

Failure policy: a verifier reply that does not parse is asked again with another sample (up to
:data:`ATTEMPTS` samples); when none parses, :class:`VerifierUnanswered` is raised, a retryable
:class:`~agentrag.errors.RunError`, so the item is left unfinished (an outage), never kept or
dropped for good, and a rerun asks again. LLM outages propagate unchanged. Every decision is
counted by the caller (``verifier: <check>`` reasons in the report).

Each check is one :class:`Check`: a name, what it asks, and which answer keeps the item.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from agentrag.errors import ContextLimitError, RunError
from agentrag.llm.base import LLM
from agentrag.records import Message, Provenance
from agentrag.synth.common import call_json_resampled

#: samples asked for one verdict before the item is left unfinished
ATTEMPTS = 3

_SYSTEM = ("You check synthesized training data against evidence. Judge only from the texts given; "
           "use no outside knowledge. Reply with a JSON object {\"holds\": true|false, \"reason\": \"...\"}.")
#: the verifier's system prompt (fakes recognise a verifier request by it)
SYSTEM = _SYSTEM


class Verdict(BaseModel):
    """The verifier's typed reply: whether the checked statement holds, and why (short)."""

    holds: bool
    reason: str = Field(default="", max_length=400)


class VerifierUnanswered(RunError):
    """The verifier gave no parseable verdict: the item stays unfinished (retryable)."""

    is_retryable = True


@dataclass(frozen=True)
class Check:
    """One question of meaning: ``name``, the statement asked about (a format string over the
    fields), and whether the item is kept when the statement holds (``keep_if``)."""

    name: str
    statement: str
    keep_if: bool


CHECKS: dict[str, Check] = {c.name: c for c in (
    Check("role", "The evidence states that the answer {answer!r} is what the question {question!r} asks for "
          "(the same relation and role, not another person or thing named nearby).", True),
    Check("supported", "Every fact stated in the text {claim!r} is stated by the evidence (names, numbers, "
          "dates and relations included).", True),
    Check("single_document", "The document alone is enough to answer the question {question!r} with "
          "{answer!r}, without any other document.", False),
    Check("needed", "The document is needed to answer the question {question!r}: without it the other "
          "documents do not give {answer!r}.", True),
    Check("restates", "The document states the true fact {fact!r} (in any wording).", False),
    Check("distractor_type", "The document is a {kind} distractor for the fact {fact!r}: {definition}", True),
    Check("same_entity", "{a!r} and {b!r} name the same entity or value.", True),
    Check("one_answer", "Exactly one entity, title or value is named by {answer!r} as the answer to {question!r} "
          "(a single name may contain 'and', '&' or '/'); it is not two or more separate answers.", True),
    Check("bridge_restated", "Bridge restated: the final answer {a!r} names the same entity or value as the "
          "earlier answer {b!r} (another written form, a part of its name or another of its names).", False),
    Check("self_contained", "Self-contained: the question {question!r} can be understood on its own: every pronoun "
          "in it refers to something the question itself names, or means people in general (as 'they' in 'Where did "
          "they film Casablanca?').", True),
)}


_GUARD = threading.Lock()
_IN_FLIGHT: dict[Any, list[Any]] = {}  # key -> [lock, holders]


@contextmanager
def _inflight(key: Any) -> Iterator[None]:
    """Serialise the callers of one question (a per-key lock, dropped when its last holder leaves)."""
    with _GUARD:
        entry = _IN_FLIGHT.setdefault(key, [threading.Lock(), 0])
        entry[1] += 1
    try:
        with entry[0]:
            yield
    finally:
        with _GUARD:
            entry[1] -= 1
            if entry[1] == 0:
                _IN_FLIGHT.pop(key, None)


def verify(llm: LLM, check: str, evidence: str | list[str], *, stage: str, sampling: Mapping[str, Any] | None = None,
           **fields: Any) -> tuple[bool, Verdict, Provenance]:
    """Ask ``llm`` whether ``check``'s statement holds over ``evidence``. Returns ``(keep,
    verdict, provenance)``: ``keep`` is what the gate does with the item. Raises
    :class:`VerifierUnanswered` when :data:`ATTEMPTS` samples give no parseable verdict; LLM
    outages and fatal errors propagate (the failure policy)."""
    spec = CHECKS[check]
    docs = [evidence] if isinstance(evidence, str) else list(evidence)
    shown = "\n\n".join(f"[{i + 1}] {d}" for i, d in enumerate(docs)) or "(no evidence)"
    user = (f"Evidence:\n{shown}\n\nStatement: {spec.statement.format(**fields)}\n\n"
            "Does the statement hold? Answer with the JSON object only.")
    messages = [Message(role="system", content=_SYSTEM), Message(role="user", content=user)]
    base = dict(sampling or {"temperature": 0.0, "max_tokens": 160, "seed": 0})
    # one question asked by several items at once (the same document checked in two trees) is
    # sent once; the others wait and read the response cache, so no answer is paid twice
    key = (id(llm), user, repr(sorted(base.items())))
    with _inflight(key):
        return _ask(llm, spec, check, messages, base, stage)


def _ask(llm: LLM, spec: Check, check: str, messages: list[Message], base: dict[str, Any],
         stage: str) -> tuple[bool, Verdict, Provenance]:
    def sampling(attempt: int) -> dict[str, Any]:
        if not attempt:
            return dict(base)
        return {**base, "temperature": max(float(base.get("temperature") or 0.0), 0.7),
                "seed": int(base.get("seed") or 0) + attempt}

    verdict, provs, errors = call_json_resampled(llm, messages, Verdict, attempts=ATTEMPTS, sampling=sampling,
                                                 name="verdict", stage=stage)
    if verdict is not None:
        return verdict.holds == spec.keep_if, verdict, provs[-1]
    if errors[-1].startswith("context_limit"):
        raise ContextLimitError(f"verifier {check}: {errors[-1]}")
    raise VerifierUnanswered(f"verifier {check}: no parseable verdict in {ATTEMPTS} samples ({errors[-1]})")


__all__ = ["ATTEMPTS", "SYSTEM", "Verdict", "VerifierUnanswered", "Check", "CHECKS", "verify"]
