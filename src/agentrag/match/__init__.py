"""The matching core: the one place where gates compare texts.

Every gate of every synthesizer (and of the annotated teacher) asks its string questions here:

- :func:`mentions` — does a text state this answer (in any written form, or one of its aliases)?
  With ``partial=True`` a part of a multi-word name (the first or last distinctive word) counts too,
  which is what leakage needs ("Lee" leaks "Ann Lee").
- :func:`equivalent` — are two answers the same answer?
- :func:`is_no_answer` — is this text a way of saying "there is no answer"?
- :func:`near_duplicate` / :func:`similarity` / :func:`containment` — texts that are the same text
  up to small edits, word order or written form.
- :func:`yes_no` — "yes", "no" or None.

All of them compare canonical tokens (:mod:`agentrag.match.canon`): token-level, on word
boundaries, never a prefix or raw-substring rule, so a name that shares letters with another
name is a different name. Eval's EM/F1 keep the official SQuAD/HotpotQA normalization
(:mod:`agentrag.eval.metrics`) for comparability with published numbers; gates use this core.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache

from agentrag.match.canon import Token, analyse, canonical, stems, tokens
from agentrag.match.vocab import (
    DEMONYMS,
    FUNCTION_WORDS,
    GENERIC_NAME_WORDS,
    NO,
    NO_ANSWER_LEADS,
    NO_ANSWER_PHRASES,
    NO_ANSWER_TAILS,
    YES,
)

#: :func:`near_duplicate`'s default: token-level similarity (Indel, in order or sorted) at or
#: above which two texts are one text written twice. Chosen on the gate benchmark's training
#: cases (``benchmarks/gates.py --split train``); docs/gates.md has the protocol and both numbers.
NEAR_DUPLICATE = 0.85


def _line(toks: Sequence[Token]) -> str:
    """The canonical words of ``toks`` as one space-padded line (for whole-word substring tests)."""
    return " " + " ".join(t.canon for t in toks) + " "


def _contains(hay: Sequence[Token], needle: Sequence[Token], hay_line: str | None = None) -> bool:
    """``needle`` occurs in ``hay`` as a contiguous run of the same words (:meth:`Token.same`);
    ``hay_line`` is ``_line(hay)`` when the caller tests several needles against one text."""
    if not needle or len(needle) > len(hay):
        return False
    if _line(needle) in (hay_line if hay_line is not None else _line(hay)):
        return True
    first, n = needle[0], len(needle)
    return any(all(hay[i + k].same(needle[k]) for k in range(n))
               for i in range(len(hay) - n + 1) if hay[i].stem == first.stem)


def _is_acronym(tok: Token) -> bool:
    s = tok.surface.replace(".", "")
    return 2 <= len(s) <= 7 and s.isalpha() and s.isupper()


def _initials(toks: Sequence[Token]) -> str:
    return "".join(t.surface[0].upper() for t in toks
                   if t.surface[:1].isupper() and t.canon not in FUNCTION_WORDS)


def _acronym_in(acronym: str, text_toks: Sequence[Token]) -> bool:
    """A run of capitalised words in ``text_toks`` whose initials spell ``acronym``: function
    words skipped ("Federal Bureau of Investigation" = FBI) or, when capitalised, counted ("What
    Will You Do" = WWYD)."""
    n = len(acronym)
    for start, first in enumerate(text_toks):
        if not first.surface[:1].isupper():
            continue
        skipping, counting, j = "", "", start
        while j < len(text_toks) and (len(skipping) < n or len(counting) < n):
            t = text_toks[j]
            cap = t.surface[:1].isupper()
            if not cap and t.canon not in FUNCTION_WORDS:
                break
            if cap:
                counting += t.surface[0].upper()
                if t.canon not in FUNCTION_WORDS:
                    skipping += t.surface[0].upper()
            if acronym in (skipping, counting):
                return True
            j += 1
    return False


def _acronym_of(toks: Sequence[Token]) -> str | None:
    """The acronym a multi-word capitalised name is written as (initials of its capitalised
    content words), when it has at least two of them."""
    if len(toks) < 2 or not all(t.surface[:1].isupper() or t.canon in FUNCTION_WORDS for t in toks):
        return None
    initials = _initials(toks)
    return initials if len(initials) >= 2 else None


def name_parts(answer: str) -> list[str]:
    """The distinctive parts of a multi-word name (its first and last words that are neither
    function words, generic name words ("University", "River"), numbers nor single letters), as
    canonical tokens; [] for a one-word answer."""
    words = [w for t in analyse(answer) for w in t.surface.split()]
    if len(words) < 2:
        return []
    distinct = []
    for w in words:
        for t in analyse(w):
            if (t.surface[:1].isupper() and len(t.canon) > 1 and not t.canon.isdigit()
                    and t.canon not in FUNCTION_WORDS and t.canon not in GENERIC_NAME_WORDS
                    and t.surface.lower() not in GENERIC_NAME_WORDS):
                distinct.append(t.canon)
    if not distinct:
        return []
    return list(dict.fromkeys([distinct[0], distinct[-1]]))


def find_mention(answer: str, text: str, aliases: Iterable[str] = (), *, partial: bool = False) -> str | None:
    """The written form through which ``text`` states ``answer`` (the answer, an alias, an
    acronym, or with ``partial`` a name part as ``"part:WORD"``), or None. A no-answer string is
    never mentioned."""
    text_toks = analyse(text)
    forms = [f for f in dict.fromkeys([answer, *aliases]) if f and f.strip() and not is_no_answer(f)]
    text_line = _line(text_toks) if forms else ""
    for form in forms:
        form_toks = analyse(form)
        if _contains(text_toks, form_toks, text_line):
            return form
        if len(form_toks) == 1 and _is_acronym(form_toks[0]) and _acronym_in(form_toks[0].surface.replace(".", ""),
                                                                              text_toks):
            return form
        acronym = _acronym_of(form_toks)
        if acronym and any(t.surface == acronym for t in text_toks):
            return acronym
    if partial:
        # every token of the text, and each word of a token read from several ("Los Angeles")
        words = {t.canon for t in text_toks} | {a[0].canon for t in text_toks for w in t.surface.split()
                                                 if (a := analyse(w))}
        for form in forms:
            for part in name_parts(form):
                if part in words:
                    return f"part:{part}"
    return None


def mentions(answer: str, text: str, aliases: Iterable[str] = (), *, partial: bool = False) -> bool:
    """``text`` states ``answer`` or one of ``aliases`` in some written form, on word boundaries
    (see :func:`find_mention`)."""
    return find_mention(answer, text, aliases, partial=partial) is not None


def _number_of(toks: tuple[Token, ...]) -> float | None:
    if len(toks) != 1:
        return None
    try:
        return float(toks[0].canon)
    except ValueError:
        return None


def equivalent(a: str, b: str, aliases: Iterable[str] = ()) -> bool:
    """``a`` and ``b`` (or one of ``b``'s ``aliases``) are the same answer: both no-answers, the
    same yes/no, the same canonical tokens (numbers, dates, written forms), equal numbers, or one
    the acronym of the other."""
    if is_no_answer(a) or is_no_answer(b):
        return is_no_answer(a) and is_no_answer(b)
    ya = yes_no(a)
    if ya is not None or yes_no(b) is not None:
        return ya == yes_no(b)
    for form in dict.fromkeys([b, *aliases]):
        if not form or is_no_answer(form):
            continue
        ta, tb = analyse(a), analyse(form)
        if ta and len(ta) == len(tb) and all(x.same(y) for x, y in zip(ta, tb, strict=True)):
            return True
        na, nb = _number_of(ta), _number_of(tb)
        if na is not None and nb is not None and na == nb:
            return True
        for x, y in ((ta, tb), (tb, ta)):
            if len(x) == 1 and _is_acronym(x[0]) and _acronym_of(y) == x[0].surface.replace(".", ""):
                return True
    return False


_NON_WORD = re.compile(r"[^a-z0-9 ]+")


@lru_cache(maxsize=8192)
def is_no_answer(text: str | None) -> bool:
    """``text`` says there is no answer ("unknown", "N/A", "none", "not stated in the documents",
    "cannot be determined", "I don't know", an empty string ...), in any case and punctuation,
    with or without a lead-in ("The answer is ...") or a tail ("... in the text")."""
    from anyascii import anyascii

    s = anyascii(text or "").lower().replace("'", "").replace("/", " ").replace(".", " ")
    s = " ".join(_NON_WORD.sub(" ", s).split())
    if not s:
        return not any(c in "$€£¥%#@&" for c in (text or ""))
    for _ in range(3):
        before = s
        for lead in ("there is ", "there are ", "there was ", *NO_ANSWER_LEADS):
            if s.startswith(lead) and s[len(lead):]:
                s = s[len(lead):]
        for tail in NO_ANSWER_TAILS:
            if s.endswith(" " + tail):
                s = s[:-len(tail) - 1]
        if s == before:
            break
    return s in NO_ANSWER_PHRASES or s.replace(" ", "") in NO_ANSWER_PHRASES


_YES_NO = re.compile(r"^\W*(yes|yeah|yep|true|correct|indeed|no|nope|false|incorrect)\b(?:\W*$|\s*[,.;:!-])",
                     re.IGNORECASE)


def yes_no(text: str | None) -> str | None:
    """"yes" or "no" when ``text`` is a yes/no answer ("Yes.", "no, they are not", "True"), else
    None ("No Doubt" and "no one" are not no-answers to a yes/no question)."""
    m = _YES_NO.match(text or "")
    if not m:
        return None
    word = m.group(1).lower()
    return "yes" if word in YES else "no" if word in NO else None


def similarity(a: str, b: str) -> float:
    """Token-level similarity in [0, 1] of two texts: the larger of the Indel similarity of their
    canonical tokens in order and sorted (word order ignored)."""
    from rapidfuzz.distance import Indel

    ta, tb = stems(a), stems(b)
    if not ta or not tb:
        return 1.0 if ta == tb else 0.0
    return max(Indel.normalized_similarity(ta, tb), Indel.normalized_similarity(sorted(ta), sorted(tb)))


def _fact_token(t: Token) -> bool:
    """A name or a number (a differing one changes what a text says)."""
    if t.canon in FUNCTION_WORDS:
        return False
    return t.canon.isdigit() or t.surface[:1].isupper() or t.surface[:1].isdigit()


def _differing(x: Sequence[Token], y: Sequence[Token]) -> list[Token]:
    have = Counter(t.stem for t in y)
    out = []
    for t in x:
        if have[t.stem] > 0:
            have[t.stem] -= 1
        else:
            out.append(t)
    return out


def near_duplicate(a: str, b: str, threshold: float = NEAR_DUPLICATE) -> bool:
    """``a`` and ``b`` are one text written twice: the same words up to order, or
    :func:`similarity` at or above ``threshold`` (default :data:`NEAR_DUPLICATE`) where the words
    that differ change no fact: no differing name or number, and every differing content word has
    a spelling variant on the other side ("directed"/"director"). Texts that differ by a
    possessive, punctuation, case, word order, a written form or a function word are duplicates;
    "Ann Lee's film" and "Ann Leeds's film" are not."""
    from rapidfuzz import fuzz

    ta, tb = analyse(a), analyse(b)
    if sorted(t.stem for t in ta) == sorted(t.stem for t in tb):
        return True
    if similarity(a, b) < threshold:
        return False
    da, db = _differing(ta, tb), _differing(tb, ta)
    if any(_fact_token(t) for t in da + db):
        return False
    for x, y in ((da, db), (db, da)):
        for t in x:
            if t.canon in FUNCTION_WORDS:
                continue
            if not any(u.canon not in FUNCTION_WORDS and fuzz.ratio(t.canon, u.canon) >= 75 for u in y):
                return False
    return True


def containment(part: str, whole: str) -> float:
    """Share of ``part``'s canonical tokens found in ``whole`` in the same order (longest common
    subsequence), 1.0 when ``whole`` quotes ``part``."""
    from rapidfuzz.distance import LCSseq

    tp, tw = stems(part), stems(whole)
    if not tp:
        return 0.0
    return LCSseq.similarity(tp, tw) / len(tp)


def demonyms(name: str) -> list[str]:
    """The nationality adjectives of a country ``name`` in any written form ("USA" -> "American"),
    for use as aliases where a relation asks for a country; [] for anything else."""
    return list(_demonyms(name))


@lru_cache(maxsize=8192)
def _demonyms(name: str) -> tuple[str, ...]:
    # one comparison per country of the table: worth keeping per name (gates ask it for every
    # candidate answer of every sentence)
    return tuple(d for country, forms in DEMONYMS.items() if equivalent(name, country) for d in forms)


_SENTENCE_END = re.compile(r"[.!?]+[\"')\u201d]*\s+(?=[\"'(\u201c]*[A-Z0-9])")
_DOTTED_WORD = re.compile(r"(?:^|\s)\(?((?:[A-Za-z]\.)*[A-Za-z]+)$")


def _abbreviation(word: str) -> bool:
    """``word`` (written before a period) is an abbreviation, not a sentence's last word: a single
    letter ("J."), a dotted acronym ("U.S."), or a short form the core knows ("St.", "Mt.", "Jr.",
    "No.", "Jan.")."""
    from agentrag.match.vocab import MONTHS, WORD_ABBREVIATIONS

    w = word.lower()
    return (len(word) == 1 or "." in word or w in set(WORD_ABBREVIATIONS.values()) | {"no", "mrs", "ms", "vs", "etc"}
            or (w in MONTHS and len(w) <= 4))


def sentences(text: str) -> list[str]:
    """The sentences of ``text``: split after ``.``, ``!`` or ``?`` followed by a capital or a
    digit, except after an abbreviation ("St. Lysa", "U.S. Army", "J. R. R. Tolkien", "No. 5" are
    one sentence)."""
    out: list[str] = []
    start = 0
    for m in _SENTENCE_END.finditer(text or ""):
        before = (text or "")[start:m.start()]
        last = _DOTTED_WORD.search(before)
        if m.group(0).startswith(".") and not m.group(0).startswith("..") and last and _abbreviation(last.group(1)):
            continue
        out.append((text or "")[start:m.end()].strip())
        start = m.end()
    out.append((text or "")[start:].strip())
    return [s for s in out if s]


def content_tokens(text: str) -> list[str]:
    """Canonical tokens of ``text`` that are not function words."""
    return [t for t in tokens(text) if t not in FUNCTION_WORDS]


__all__ = ["NEAR_DUPLICATE", "FUNCTION_WORDS", "Token", "analyse", "tokens", "stems", "canonical", "content_tokens",
           "mentions", "find_mention", "name_parts", "demonyms", "equivalent", "is_no_answer", "yes_no", "similarity",
           "near_duplicate", "containment", "sentences"]
