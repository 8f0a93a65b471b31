"""The structured replies of the Tracer builder's LLM calls, as pydantic models with length bounds.

Each model gives the JSON schema sent to the backend (grammar-constrained decoding on the
embedded backend, ``response_format`` on OpenAI-compatible servers) and validates the reply
(:func:`agentrag.synth.common.call_json`); a reply that does not validate is a flagged record
with the raw output and a ``parse_error`` reason.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from agentrag.match import is_no_answer
from agentrag.synth.tracer.config import DOMAINS

Domain = Literal[DOMAINS]  # type: ignore[valid-type]


def _domain(value: Any) -> Any:
    """A free-form domain label normalised to one of :data:`DOMAINS` (unknown -> ``other``)."""
    if not isinstance(value, str):
        return value
    d = value.strip().lower().replace(" ", "_")
    return d if d in DOMAINS else "other"


def _scalar_text(value: Any) -> Any:
    """An answer written as a bare number (``1857``) taken as its text."""
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def _aliases(value: Any) -> Any:
    """Aliases without blanks; numbers as text (``null`` = none)."""
    if value is None:
        return []
    if isinstance(value, list):
        return [str(_scalar_text(v)).strip() for v in value if str(_scalar_text(v)).strip()]
    return value


Question = Annotated[str, Field(max_length=600)]
Answer = Annotated[str, BeforeValidator(_scalar_text), Field(max_length=300)]
Aliases = Annotated[list[Annotated[str, Field(max_length=200)]], BeforeValidator(_aliases), Field(max_length=10)]


class _Out(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


class DocAnnotation(_Out):
    """§3.1: what the passage is about and its domain."""

    entity_type: str = Field(max_length=80)
    domain: Annotated[Domain, BeforeValidator(_domain)]


class QAPair(_Out):
    """A question with its short answer and the answer's other names."""

    question: Question
    answer: Answer
    aliases: Aliases = Field(default_factory=list)

    def clean_aliases(self) -> list[str]:
        """The aliases without repeats, the answer itself, or no-answer strings ("unknown", "N/A" ...:
        the matching core's vocabulary), which would make a no-answer a gold."""
        return [a for a in dict.fromkeys(self.aliases) if a != self.answer and not is_no_answer(a)]

    def no_answer_aliases(self) -> list[str]:
        """The aliases :meth:`clean_aliases` removed because they say there is no answer (counted)."""
        return [a for a in dict.fromkeys(self.aliases) if a != self.answer and is_no_answer(a)]


class AtomicPairs(_Out):
    """§3.2: the atomic pairs written for one document (the first ``pairs_per_doc`` are used)."""

    pairs: list[QAPair] = Field(max_length=20)


class LinkPair(QAPair):
    """§3.3: the new atomic pair on a related document, and how it links to the chain."""

    template: Literal["inference", "comparison"]


AuditFailure = Literal["none", "false_entity_link", "trivial_concatenation", "no_common_basis",
                       "answer_not_supported", "other"]


class AuditVerdict(_Out):
    """§3.3 stage 2: the auditor's verdict on a composed question (``failure``: which rubric item
    it breaks; "none" when valid)."""

    reason: str = Field(default="", max_length=1000)
    failure: AuditFailure = "none"
    valid: bool


class ShortAnswer(_Out):
    """A short answer, closed-book or from the given documents (``unknown`` when not known)."""

    answer: Annotated[str, BeforeValidator(_scalar_text), Field(max_length=300)]


__all__ = ["AuditFailure", "DocAnnotation", "QAPair", "AtomicPairs", "LinkPair", "AuditVerdict", "ShortAnswer"]
