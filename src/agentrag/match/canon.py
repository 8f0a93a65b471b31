"""Canonical word tokens: the one place where a text's written form is folded away.

``tokens(text)`` turns a text into canonical tokens, so that two texts that state the same thing
in other written forms give the same tokens:

- Unicode: NFKC, then transliteration to ASCII (anyascii): "Zürich" and "Zurich", "Đoković" and
  "Djokovic"'s ASCII spelling "Dokovic" (a transliteration the dataset uses as an alias still
  needs the alias);
- case (lower-cased), articles dropped ("The Hague" = "Hague"), "&" = "and";
- possessives and apostrophes ("Oslo's" = "Oslo", "O'Brien" = "OBrien"), hyphens split
  ("Oslo-born" = "Oslo born"), other punctuation dropped;
- numbers: words to digits (text2num: "twenty-five" = "25", "third" = "3rd" = "3"),
  thousands separators ("1,200" = "1200"), scale words ("1.2 million" = "1200000"),
  leading zeros, currency symbols ("$5" = "5 dollars" = "5 USD"), units ("km" = "kilometres"),
  "%" = "percent";
- dates in any common order and format ("5 March 1990", "March 5, 1990", "1990-03-05",
  "03/05/1990" (dateparser, month first when ambiguous)) become ``1990 march d5``: year, month,
  day, so a year alone or a month and year are a contiguous part of the full date;
- plurals, when one side writes the word in lower case ("countries" = "Country"; two
  capitalised names must be equal: "Roberts" is not "Robert"; :meth:`Token.same`);
- abbreviations: dotted acronyms closed up ("U.S." = "US"), countries and organisations
  ("US" = "USA" = "United States of America"; written in capitals only, so the pronoun "us" is no
  country), single words ("St." = "Saint", "Mt." = "Mount", "No. 5" = "number 5").

Tokens are compared whole (word boundaries): no prefix or substring rule anywhere.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import NamedTuple

from agentrag.match.vocab import ABBREVIATION_GROUPS, ARTICLES, DOTTED_ONLY, MONTHS, WORD_ABBREVIATIONS

_SCALES = {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000, "trillion": 1_000_000_000_000}
_CURRENCY_SYMBOLS = {"$": "usd", "US$": "usd", "£": "gbp", "€": "eur", "¥": "jpy"}
_CURRENCY_WORDS = {"dollar": "usd", "dollars": "usd", "usd": "usd", "pound sterling": "gbp", "pounds sterling": "gbp",
                   "gbp": "gbp", "euro": "eur", "euros": "eur", "eur": "eur", "yen": "jpy", "jpy": "jpy"}
_UNITS = {"kilometre": "km", "kilometer": "km", "kilometres": "km", "kilometers": "km", "kms": "km",
          "metre": "m", "meter": "m", "metres": "m", "meters": "m", "centimetre": "cm", "centimeter": "cm",
          "centimetres": "cm", "centimeters": "cm", "millimetre": "mm", "millimeter": "mm", "millimetres": "mm",
          "millimeters": "mm", "mile": "mi", "miles": "mi", "foot": "ft", "feet": "ft", "kilogram": "kg",
          "kilograms": "kg", "kilogramme": "kg", "kilogrammes": "kg", "kgs": "kg", "gram": "g", "grams": "g",
          "pound": "lb", "pounds": "lb", "lbs": "lb", "tonne": "t", "tonnes": "t", "hectare": "ha", "hectares": "ha",
          "percent": "percent", "per cent": "percent", "pct": "percent", "sq": "square", "inches": "inch",
          "celsius": "c", "fahrenheit": "f", "hour": "h", "hours": "h", "hr": "h", "hrs": "h",
          "minute": "min", "minutes": "min", "mins": "min", "second": "sec", "seconds": "sec", "secs": "sec",
          "year": "yr", "years": "yr", "yrs": "yr"}
_CAP_MONTH = "(?i:" + "|".join(sorted(MONTHS, key=len, reverse=True)) + ")"
_ORD = r"(?:st|nd|rd|th)?"
_DATE_PATTERNS = (
    # 5 March 1990, 5th of March, 1990, 5 Mar. 1990
    re.compile(rf"\b(?P<day>\d{{1,2}}){_ORD}[\s-]+(?:of\s+)?(?P<mon>{_CAP_MONTH})\.?,?[\s-]+(?P<year>\d{{3,4}})\b"),
    # March 5, 1990 / March 5th 1990
    re.compile(rf"\b(?P<mon>{_CAP_MONTH})\.?[\s-]+(?P<day>\d{{1,2}}){_ORD},?[\s-]+(?P<year>\d{{3,4}})\b"),
    # 1990-03-05
    re.compile(r"\b(?P<year>\d{4})-(?P<mon>\d{1,2})-(?P<day>\d{1,2})\b"),
    # March 1990, March of 1990
    re.compile(rf"\b(?P<mon>{_CAP_MONTH})\.?,?[\s-]+(?:of\s+)?(?P<year>\d{{4}})\b"),
    # 5 March, 5th of March (no year)
    re.compile(rf"\b(?P<day>\d{{1,2}}){_ORD}[\s-]+(?:of\s+)?(?P<mon>{_CAP_MONTH})\b\.?"),
    # March 5 (no year; a following digit would be a year, handled above)
    re.compile(rf"\b(?P<mon>{_CAP_MONTH})\.?[\s-]+(?P<day>\d{{1,2}}){_ORD}\b(?!,?[\s-]*\d)"),
)
_NUMERIC_DATE = re.compile(r"\b(\d{1,2})([/.])(\d{1,2})\2(\d{4})\b")
_MONTH_WORDS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
                "november", "december"]
_TOKEN = re.compile(r"\d+\.\d+|[A-Za-z0-9]+(?:'[A-Za-z0-9]+)*")
_DOTTED_ACRONYM = re.compile(r"\b((?:[A-Za-z]\.){2,})(?=\W|$)")
_DOTTED_WORD = re.compile(r"\b(" + "|".join(w.capitalize() for w in DOTTED_ONLY) + r")\.(?=\s*\d)")
_DOTTED_LONG = {"no": "number", "co": "company", "col": "colonel", "gen": "general", "vol": "volume"}
_SCALED = re.compile(r"\b(\d+(?:\.\d+)?)\s+(thousand|million|billion|trillion)\b", re.IGNORECASE)
_GROUPED = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")


class Token(NamedTuple):
    """One canonical token, its plural-folded form and the word it was read from (cased,
    transliterated)."""

    canon: str
    surface: str
    stem: str = ""

    def same(self, other: Token) -> bool:
        """The same word: equal canonical forms, or singular and plural of a word that one of the
        two writes in lower case (a common noun: "countries"/"country"); two capitalised forms
        must be equal ("Roberts" is not "Robert")."""
        return self.canon == other.canon or (self.stem == other.stem and (
            self.surface[:1].islower() or other.surface[:1].islower()))


def _month_number(name: str) -> int:
    return MONTHS[name.lower().rstrip(".")]


def _date_tokens(year: int | None, month: int | None, day: int | None) -> str:
    parts = []
    if year is not None:
        parts.append(str(year))
    if month is not None:
        parts.append(_MONTH_WORDS[month - 1])
    if day is not None:
        parts.append(f"d{day}")
    return " " + " ".join(parts) + " "


def _replace_dates(text: str) -> str:
    def numeric(m: re.Match[str]) -> str:
        parsed = _parse_numeric_date(m.group(0))
        if parsed is None:
            return m.group(0)
        return _date_tokens(int(m.group(4)), parsed[0], parsed[1])

    text = _NUMERIC_DATE.sub(numeric, text)
    for pattern in _DATE_PATTERNS:
        def repl(m: re.Match[str]) -> str:
            g = m.groupdict()
            mon = g.get("mon")
            month = int(mon) if mon and mon.isdigit() else (_month_number(mon) if mon else None)
            day = int(g["day"]) if g.get("day") else None
            year = int(g["year"]) if g.get("year") else None
            if month is None or not 1 <= month <= 12 or (day is not None and not 1 <= day <= 31):
                return m.group(0)
            return _date_tokens(year, month, day)
        text = pattern.sub(repl, text)
    return text


@lru_cache(maxsize=4096)
def _parse_numeric_date(span: str) -> tuple[int, int] | None:
    """(month, day) of a numeric date such as 05/03/1990 (dateparser; month first when both
    orders are valid, day first when the first number cannot be a month), or None."""
    import dateparser

    parsed = dateparser.parse(span, languages=["en"], settings={"REQUIRE_PARTS": ["day", "month", "year"]})
    if parsed is None:
        return None
    return parsed.month, parsed.day


def _prepare(text: str) -> str:
    """The text with every written-form rule that spans more than one word applied."""
    from anyascii import anyascii
    from text_to_num import alpha2digit

    t = unicodedata.normalize("NFKC", text)
    for symbol, code in _CURRENCY_SYMBOLS.items():
        if symbol in t:
            t = re.sub(re.escape(symbol) + r"\s*(\d[\d,.]*(?:\s+(?:thousand|million|billion|trillion))?)",
                       rf"\1 {code}", t)
    t = anyascii(t).replace("%", " percent ")
    t = _DOTTED_ACRONYM.sub(lambda m: m.group(1).replace(".", "").upper() + " ", t)
    t = _DOTTED_WORD.sub(lambda m: _DOTTED_LONG[m.group(1).lower()], t)
    t = _GROUPED.sub("", t)
    t = _SCALED.sub(lambda m: _scaled(m.group(1), m.group(2)), t)
    t = t.replace("&", " and ")
    t = alpha2digit(t, "en", threshold=0)
    t = _SCALED.sub(lambda m: _scaled(m.group(1), m.group(2)), t)
    return _replace_dates(t)


def _scaled(number: str, scale: str) -> str:
    value = float(number) * _SCALES[scale.lower()]
    return str(int(value)) if value == int(value) else str(value)


def _plural(word: str) -> str:
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "sses", "zes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is", "os")):
        return word[:-1]
    return word


def _bare(surface: str) -> str:
    """The word lower-cased without possessive endings or apostrophes ("States's" -> "states")."""
    w = surface.lower()
    while w.endswith("'s"):
        w = w[:-2]
    return w.replace("'", "")


_DECIMAL = re.compile(r"\d+\.\d+")


def _canon_word(surface: str) -> str:
    w = _bare(surface)
    m = _ORDINAL.match(w)
    if m:
        w = m.group(1)
    if w.isdigit():
        return str(int(w)) if len(w) < 18 else w
    if _DECIMAL.fullmatch(w):
        return w.rstrip("0").rstrip(".")
    if w in _UNITS:
        return _UNITS[w]
    if w in _CURRENCY_WORDS:
        return _CURRENCY_WORDS[w]
    return WORD_ABBREVIATIONS.get(w, w)


def _token(canon: str, surface: str) -> Token:
    stem = _plural(canon)
    return Token(canon, surface, WORD_ABBREVIATIONS.get(stem, stem))


_GROUP_LONG = sorted(((tuple(long.split()), canon) for canon, longs, _ in ABBREVIATION_GROUPS for long in longs),
                     key=lambda x: -len(x[0]))
#: the long forms by their first word (each list longest first, as in ``_GROUP_LONG``)
_GROUP_LONG_BY_FIRST: dict[str, list[tuple[tuple[str, ...], str]]] = {}
for _long, _canon in _GROUP_LONG:
    _GROUP_LONG_BY_FIRST.setdefault(_long[0], []).append((_long, _canon))
_GROUP_SHORT = {short: canon for canon, _, shorts in ABBREVIATION_GROUPS for short in shorts}
_MULTI_UNITS = {("per", "cent"): "percent", ("pound", "sterling"): "gbp", ("pounds", "sterling"): "gbp",
                ("us", "dollars"): "usd", ("us", "dollar"): "usd"}


#: texts whose analysis is kept: a gate reads the same few documents many times within one item,
#: and every token kept is an object the garbage collector walks, so the cache stays small
ANALYSED_CACHE = 4096


@lru_cache(maxsize=ANALYSED_CACHE)
def analyse(text: str) -> tuple[Token, ...]:
    """The canonical tokens of ``text`` with the words they were read from (articles dropped)."""
    prepared = _prepare(text or "")
    words = [w for w in _TOKEN.findall(prepared) if w != "s"]  # a lone "s" is a stray possessive
    letters = [c for c in prepared if c.isalpha()]
    shouting = len(letters) > 12 and sum(c.isupper() for c in letters) > 0.8 * len(letters)
    lower = [_bare(w) for w in words]
    out: list[Token] = []
    i = 0
    while i < len(words):
        matched = False
        for long, canon in _GROUP_LONG_BY_FIRST.get(lower[i], ()):
            n = len(long)
            if tuple(lower[i:i + n]) == long:
                out.append(_token(canon, " ".join(words[i:i + n])))
                i += n
                matched = True
                break
        if matched:
            continue
        pair = tuple(lower[i:i + 2])
        if len(pair) == 2 and pair in _MULTI_UNITS:
            out.append(_token(_MULTI_UNITS[pair], " ".join(words[i:i + 2])))
            i += 2
            continue
        w = words[i]
        if w in _GROUP_SHORT and not shouting:
            out.append(_token(_GROUP_SHORT[w], w))
        elif lower[i] not in ARTICLES or (w == "A" and i > 0 and words[i - 1][:1].isupper() and not shouting):
            out.append(_token(_canon_word(w), w))
        i += 1
    return tuple(out)


def tokens(text: str) -> list[str]:
    """Canonical tokens of ``text`` (see the module docstring)."""
    return [t.canon for t in analyse(text)]


def stems(text: str) -> list[str]:
    """Plural-folded canonical tokens of ``text`` (for similarity, where a plural is an edit)."""
    return [t.stem for t in analyse(text)]


def canonical(text: str) -> str:
    """The canonical tokens of ``text`` joined by spaces (a comparison key)."""
    return " ".join(tokens(text))


__all__ = ["Token", "analyse", "tokens", "stems", "canonical"]
