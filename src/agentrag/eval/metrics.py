"""Answer metrics (EM, F1, acc) with SQuAD/HotpotQA normalisation, and gold-passage recall.

Normalisation (the official SQuAD / HotpotQA one): lowercase, drop punctuation, drop the
articles *a*, *an*, *the*, collapse whitespace. Every metric is the maximum over the gold answers.
F1 follows HotpotQA's special case: when the normalised prediction or gold is ``yes``, ``no`` or
``noanswer`` and the two differ, F1 is 0 (token overlap would otherwise give partial credit).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence

from agentrag.records import Hit

_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_SPECIAL = frozenset({"yes", "no", "noanswer"})


def normalize_answer(s: str) -> str:
    """Lowercase, remove punctuation, remove articles (a/an/the), collapse whitespace."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _golds(golds: str | Sequence[str]) -> list[str]:
    return [golds] if isinstance(golds, str) else list(golds)


def _f1_single(pred: str, gold: str) -> float:
    p, g = normalize_answer(pred), normalize_answer(gold)
    if (p in _SPECIAL or g in _SPECIAL) and p != g:
        return 0.0
    p_toks, g_toks = p.split(), g.split()
    common = Counter(p_toks) & Counter(g_toks)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(p_toks)
    recall = same / len(g_toks)
    return 2 * precision * recall / (precision + recall)


def em(pred: str | None, golds: str | Sequence[str]) -> float:
    """Exact match after normalisation, max over golds (1.0 or 0.0; 0.0 for a missing prediction)."""
    if pred is None:
        return 0.0
    p = normalize_answer(pred)
    return float(any(p == normalize_answer(g) for g in _golds(golds)))


def f1(pred: str | None, golds: str | Sequence[str]) -> float:
    """Token F1 after normalisation (HotpotQA's yes/no/noanswer rule), max over golds."""
    if pred is None:
        return 0.0
    return max((_f1_single(pred, g) for g in _golds(golds)), default=0.0)


def acc(pred: str | None, golds: str | Sequence[str]) -> float:
    """1.0 when some normalised gold answer occurs inside the normalised prediction (token-aligned)."""
    if pred is None:
        return 0.0
    p = f" {normalize_answer(pred)} "
    return float(any(normalize_answer(g) and f" {normalize_answer(g)} " in p for g in _golds(golds)))


def passage_recall(hits: Iterable[Hit], gold_ids: Sequence[str] = (),
                   gold_titles: Sequence[str] = ()) -> float | None:
    """Fraction of gold passages among ``hits``: by passage id when ``gold_ids`` are given, else by
    title (``gold_titles``, compared case-insensitively). ``None`` when there is no gold to match."""
    hits = list(hits)
    if gold_ids:
        found = {h.id for h in hits}
        gold = set(gold_ids)
        return len(gold & found) / len(gold)
    if gold_titles:
        found_t = {h.title.strip().lower() for h in hits}
        gold_t = {t.strip().lower() for t in gold_titles}
        return len(gold_t & found_t) / len(gold_t)
    return None


__all__ = ["normalize_answer", "em", "f1", "acc", "passage_recall"]
