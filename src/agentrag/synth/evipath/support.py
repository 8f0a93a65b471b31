"""The checks behind the EviPath gates (ours; the paper has none), composed from the shared gate
checks (:mod:`agentrag.synth.gates`) over the matching core (:mod:`agentrag.match`): no string
comparison is made here.

- support: a sub-answer sentence is stated by the evidence it selected (its names and numbers
  mentioned there, its other content words there or in a spelling variant; the verifier judges
  paraphrase and role); the final answer is stated by an observation (yes/no only to a yes/no
  question; a number may be computed from stated numbers);
- leakage: a planner text names the final answer before an observation showed it;
- self-containedness: a sub-question keeps no placeholder or pronoun with nothing to refer to;
- thoughts: synthesis-only wording, degenerate repetition, names and numbers no evidence states.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from agentrag.match import FUNCTION_WORDS, analyse, mentions, name_parts, tokens, yes_no
from agentrag.synth.gates import (
    answer_support,
    claim_support,
    is_number,
    leakage,
    synthesis_wording,
    thought_problem,
    without_references,
)
from agentrag.synth.verifier import verify

PRONOUNS = frozenset("he she him her his hers they them their theirs it its himself herself itself themselves "
                     "this these those".split())
_THING_PRONOUNS = frozenset("it its itself this these those".split())
# possessives a question's wh-subject binds ("Which actor won an award for his role?")
_BOUND_FORMS = frozenset("his her hers their theirs".split())
# "they" read generically ("Where did they film Some Like It Hot?": the film-makers)
_GENERIC = frozenset("they them their".split())
# a verb that, right before a pronoun, makes it the subject of an inverted question ("Who was his father?")
_INVERTED = frozenset("is are was were be been do does did has have had will would can could shall should may might "
                      "must".split())
# placeholders an LLM leaves in a sub-question instead of the entity: #1, [X], [answer], <entity>,
# {film}, ___
_PLACEHOLDER = re.compile(r"#\d+|\[[^\]]*\]|<[^>]*>|\{[^}]*\}|_{2,}")


def is_yes_no(answer: str) -> bool:
    return yes_no(answer) is not None


def given_by_question(question: str, answer: str, aliases: Sequence[str] = ()) -> bool:
    """The question names the answer: in full, or — a choice between named entities ("A or B",
    "both") — by a distinctive part of it ("Lee or Smith?" names "Ann Lee")."""
    if mentions(answer, question, aliases):
        return True
    choice = any(t in ("or", "both") for t in tokens(question))
    return choice and any(p in tokens(question) for f in (answer, *aliases) for p in name_parts(f))


def sub_answer_problem(answer: str, supporting: Sequence[str], question: str, verifier: Any = None,
                       stage: str = "gates") -> str | None:
    """Why a sub-answer sentence is not stated by its selected evidence F̂_i, or None."""
    return claim_support(answer, supporting, question=question, verifier=verifier, stage=stage)


def final_answer_unsupported(answer: str, observations: Sequence[str], question: str, aliases: Sequence[str] = (),
                             verifier: Any = None, stage: str = "gates") -> str | None:
    """Why the final answer is not stated by the observations, or None. Yes/no answers are
    judgements over the observations (only to a yes/no question); a number the observations do
    not spell may be computed from numbers they state (the verifier decides; lexical only: kept
    when there are numbers to compute from)."""
    shown = [*observations, question]
    reason = answer_support(answer, shown, question=question, aliases=aliases, verifier=verifier, stage=stage)
    if reason and reason.startswith("not_stated") and verifier is None and is_number(answer) \
            and any(t.isdigit() for o in observations for t in tokens(o)):
        return None
    return reason


def leaks(answers: Sequence[str], question: str, text: str, seen: str) -> str | None:
    """Whether ``text`` names one of the final ``answers`` before ``seen`` (the observations so
    far) showed it; references to earlier steps ("#2", "step 2") are no mention."""
    text = without_references(text)
    for a in answers:
        reason = leakage(a, text, question=question, aliases=[x for x in answers if x != a], seen=seen)
        if reason:
            return reason
    return None


def _name_spans(toks: Sequence[Any], names: Sequence[str], pronouns_only: bool) -> set[int]:
    """Positions of ``toks`` inside a mention of one of ``names`` in any case (annotators write
    titles in lower case, "who sang do they know it's christmas?"); ``pronouns_only``: only names
    whose own words include a pronoun."""
    covered: set[int] = set()
    for name in names:
        form = analyse(name)
        if not form or (pronouns_only and not any(t.surface.lower() in PRONOUNS for t in form)):
            continue
        canon = [t.canon for t in form]
        for k in range(len(toks) - len(form) + 1):
            if [t.canon for t in toks[k:k + len(form)]] == canon:
                covered.update(range(k, k + len(form)))
    return covered


def _bound_by_wh(toks: Sequence[Any], k: int) -> bool:
    """A possessive or object pronoun bound by the question's wh-subject: "Which actor won an award
    for his role?", "Who wrote their first song?", but not "Who was his father?" (the wh-word is
    followed by a verb that inverts the question) nor a pronoun right after such a verb."""
    if toks[k].surface.lower() not in _BOUND_FORMS or len(toks) < 3 or k < 2:
        return False
    if toks[k].surface.lower() in ("his", "her", "their") and (k + 1 >= len(toks) or toks[k + 1].canon in FUNCTION_WORDS):
        return False  # a possessive determiner precedes its noun ("in her" ends on an object)
    if toks[0].surface.lower() not in ("who", "which", "what") or toks[1].surface.lower() in _INVERTED:
        return False
    if toks[1].canon in FUNCTION_WORDS or toks[k - 1].surface.lower() in _INVERTED:
        return False
    verb = next((j for j in range(2, k) if toks[j].surface.lower() in _INVERTED), None)
    # after "is/was/has ..." only a participle keeps the wh-phrase the subject ("Which actor was
    # nominated for his role?"); "Which court is the highest court in his country?" names another
    return verb is None or toks[verb + 1].surface.lower().endswith(("ed", "en", "wn"))


def not_self_contained(question: str, names: Sequence[str] = (), verifier: Any = None,
                       stage: str = "gates") -> str | None:
    """Why a sub-question is not self-contained, or None: a placeholder, or a pronoun with nothing
    before it to refer to. "he/she/they/his/her/their..." need a name (a capitalized word or a
    number after the first word) before them ("Where did Hank Snow live when he died?" is fine,
    "Where was he born?" is not), or a wh-subject that binds them ("Which actor won an award for
    his role as Forrest Gump?"); "it/its/this..." need any content word before them ("the world
    ... its coffee") or a name anywhere ("When does it get cold in North Dakota?"). A capitalized
    pronoun inside the question is part of a title ("It'll Be Me"), and so is one inside a mention
    of ``names`` (the titles of the item's evidence) in any case ("When is it follows set?").
    "they/them/their" with a name after them may be generic ("Where did they film Some Like It
    Hot?"): the verifier decides; lexical only (``verifier`` None) it is rejected."""
    m = _PLACEHOLDER.search(question)
    if m:
        return f"placeholder {m.group(0)!r}"
    toks = analyse(question)
    titled = _name_spans(toks, names, pronouns_only=True)
    named = _name_spans(toks, names, pronouns_only=False)
    generic = None
    for k, tok in enumerate(toks):
        low = tok.surface.lower()
        if low not in PRONOUNS or (k > 0 and tok.surface[:1].isupper()) or k in titled:
            continue
        if low in _THING_PRONOUNS:  # or a name anywhere: "When does it get cold in North Dakota?"
            resolved = any(t.canon not in FUNCTION_WORDS for t in toks[:k]) or \
                any(t.surface[:1].isupper() or j in titled for j, t in enumerate(toks[k + 1:], start=k + 1))
        else:
            resolved = any(t.surface[:1].isupper() or (t.surface[:1].isdigit() and not t.surface[-2:].isalpha())
                           for t in toks[1:k]) or _bound_by_wh(toks, k)  # an ordinal ("1st") names nothing
            if not resolved and low in _GENERIC and \
                    any(t.surface[:1].isupper() or j in named for j, t in enumerate(toks[k + 1:], start=k + 1)):
                generic = generic or tok.surface
                continue
        if not resolved:
            return f"unresolved pronoun {tok.surface!r}"
    if generic is not None:
        if verifier is None:
            return f"unresolved pronoun {generic!r}"
        keep, verdict, _ = verify(verifier, "self_contained", [], stage=stage, question=question)
        if not keep:
            return f"verifier: self_contained: pronoun {generic!r} ({verdict.reason})"
    return None


__all__ = ["synthesis_wording", "is_yes_no", "given_by_question", "sub_answer_problem", "final_answer_unsupported",
           "leaks", "not_self_contained", "thought_problem", "PRONOUNS"]
