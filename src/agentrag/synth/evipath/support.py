"""Word-level checks behind the EviPath gates (ours; the paper has none): word tokens, whether a
claim is supported by evidence, whether an answer is named in a text, and whether a sub-question
is self-contained.

Tokens are lower-cased runs of letters and digits, so hyphens and possessives split ("Oslo-born"
-> ``oslo born``, "Oslo's" -> ``oslo s``) and an answer is caught inside them. Placeholders
(``#2``) are removed before tokenizing, so a numeric answer "2" is not found in "#2".

Support is lexical: the *new* content words of a claim (those not already in the question, minus
function words) must be found in the evidence (a word of more than 4 letters matches an evidence
word that starts with its first ``max(4, len - 3)`` letters, so "directed"/"director" and
"hanged"/"hanging" match). A claim with no new content word is supported. This catches an invented name or date ("directed by Zed Zorro" when the evidence says
Ann Lee), not a paraphrase.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_PLACEHOLDER_TOKEN = re.compile(r"#\d+")

FUNCTION_WORDS = frozenset("""
a an the of in on at to for from by with and or but nor as is are was were be been being am do does did
has have had not no yes it its this that these those there here which who whom whose what when where why
how than then so such also both either neither each any all some one s answer question known
""".split())

YES_NO = frozenset({"yes", "no"})
PRONOUNS = frozenset("he she him her his hers they them their theirs it its himself herself itself themselves "
                     "this these those".split())
_THING_PRONOUNS = frozenset("it its itself this these those".split())
# placeholders an LLM leaves in a sub-question instead of the entity: #1, [X], [answer], <entity>,
# {film}, ___
_PLACEHOLDER = re.compile(r"#\d+|\[[^\]]*\]|<[^>]*>|\{[^}]*\}|_{2,}")


def words(text: str) -> list[str]:
    """Lower-cased word tokens (hyphens and possessives split, ``#k`` placeholders dropped)."""
    return _TOKEN.findall(_PLACEHOLDER_TOKEN.sub(" ", text).lower())


def names(text: str, phrase: str) -> bool:
    """``phrase``'s word tokens occur, in order and contiguous, among ``text``'s word tokens."""
    p = [w for w in words(phrase)]
    if not p:
        return False
    t = words(text)
    return any(t[i:i + len(p)] == p for i in range(len(t) - len(p) + 1))


def is_yes_no(answer: str) -> bool:
    return set(words(answer)) <= YES_NO and bool(words(answer))


def is_number(answer: str) -> bool:
    w = words(answer)
    return bool(w) and all(x.isdigit() for x in w)


def missing_words(claim: str, evidence: Iterable[str], question: str = "") -> list[str]:
    """The new content words of ``claim`` (not in ``question``, not function words) that
    ``evidence`` does not contain; [] means supported."""
    have = {w for e in evidence for w in words(e)}
    prefixes = {w[:k] for w in have for k in range(4, len(w))}
    asked = set(words(question))
    new = [w for w in dict.fromkeys(words(claim)) if w not in FUNCTION_WORDS and w not in asked]
    return [w for w in new if w not in have and not (len(w) > 4 and w[:max(4, len(w) - 3)] in prefixes)]


def final_answer_unsupported(answer: str, observations: Sequence[str], question: str) -> str | None:
    """Why the final answer is not supported by the observations (and the question), or None.
    Yes/no answers are judgements over the observations; a number absent from them is accepted
    when the observations hold numbers to compute it from (durations, counts, differences)."""
    if is_yes_no(answer):
        return None
    missing = missing_words(answer, observations, question)
    if not missing:
        return None
    if is_number(answer) and any(w.isdigit() for o in observations for w in words(o)):
        return None
    return f"{answer!r}: {missing} in no observation"


def not_self_contained(question: str) -> str | None:
    """Why a sub-question is not self-contained, or None: a placeholder, or a pronoun with nothing
    before it to refer to. "he/she/they/his/her/their..." need a name (a capitalized word or a
    number after the first word) before them ("Where did Hank Snow live when he died?" is fine,
    "Where was he born?" is not); "it/its/this..." need any content word ("the world ... its
    coffee"). A capitalized pronoun inside the question is part of a title ("It'll Be Me")."""
    m = _PLACEHOLDER.search(question)
    if m:
        return f"placeholder {m.group(0)!r}"
    tokens = _TOKEN.findall(question)
    for k, tok in enumerate(tokens):
        low = tok.lower()
        if low not in PRONOUNS or (k > 0 and tok[:1].isupper()):
            continue
        before = tokens[1:k]
        if low in _THING_PRONOUNS:
            resolved = any(t.lower() not in FUNCTION_WORDS for t in tokens[:k])
        else:
            resolved = any(t[:1].isupper() or t[:1].isdigit() for t in before)
        if not resolved:
            return f"unresolved pronoun {tok!r}"
    return None


# wording that only makes sense while synthesizing (the LLM was shown the answer and the gold
# evidence); an agent at inference has neither, so no training target may contain it
_SYNTHESIS_WORDING = re.compile(
    r"\bgold(?:en)? (?:evidence|answer|fact|sentence|passage|paragraph|ind(?:ex|ices)|support)(?:s|es)?\b|\b(?:you|i|we) (?:already )?know the (?:correct |final |right )?"
    r"answer\b|\b(?:correct|given|expected) answer\b|\banswer (?:is|was) given\b", re.IGNORECASE)


def synthesis_wording(text: str) -> str | None:
    """The synthesis-only phrase in ``text`` ("golden evidence", "you know the answer", ...), or None."""
    m = _SYNTHESIS_WORDING.search(text)
    return m.group(0) if m else None


__all__ = ["synthesis_wording", "words", "names", "is_yes_no", "is_number", "missing_words", "final_answer_unsupported",
           "not_self_contained", "FUNCTION_WORDS", "PRONOUNS"]
