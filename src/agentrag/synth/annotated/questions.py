"""Natural sub-questions from the annotators' hops.

2WikiMultihopQA writes a hop as a Wikidata triple (subject, relation, object) and MuSiQue often as
``subject >> relation``; both become the question a person would type, from :data:`RELATIONS`
("director" -> "Who directed X?", "located in the administrative territorial entity" -> "Where is
X located?"). A relation the table lacks gets a question whose wh-word follows the answer's type
(a date: "When", a number: "How many", else "What"). MuSiQue's free-text sub-questions come from
web search queries: lower-case starts, no question mark, a space before it, doubled words; they
are tidied the same way (capitalised, one "?", no doubled word, no stray spacing).
"""

from __future__ import annotations

import re

from agentrag.match import tokens

#: Wikidata-style relation -> question template over the subject ``{s}``
RELATIONS: dict[str, str] = {
    "director": "Who directed {s}?",
    "country of citizenship": "Which country is {s} a citizen of?",
    "date of birth": "When was {s} born?",
    "date of death": "When did {s} die?",
    "place of birth": "Where was {s} born?",
    "place of death": "Where did {s} die?",
    "place of burial": "Where is {s} buried?",
    "cause of death": "What was the cause of death of {s}?",
    "country": "Which country is {s} in?",
    "country of origin": "Which country does {s} come from?",
    "father": "Who is the father of {s}?",
    "mother": "Who is the mother of {s}?",
    "spouse": "Who is the spouse of {s}?",
    "sibling": "Who is a sibling of {s}?",
    "child": "Who is a child of {s}?",
    "publication date": "When was {s} first published?",
    "inception": "When was {s} founded?",
    "performer": "Who performed {s}?",
    "composer": "Who composed the music for {s}?",
    "lyrics by": "Who wrote the lyrics of {s}?",
    "author": "Who wrote {s}?",
    "screenwriter": "Who wrote the screenplay of {s}?",
    "producer": "Who produced {s}?",
    "editor": "Who edited {s}?",
    "creator": "Who created {s}?",
    "developer": "Who developed {s}?",
    "designed by": "Who designed {s}?",
    "architect": "Who designed {s}?",
    "manufacturer": "Who manufactured {s}?",
    "publisher": "Who published {s}?",
    "founded by": "Who founded {s}?",
    "owned by": "Who owns {s}?",
    "operator": "Who operates {s}?",
    "employer": "Who employed {s}?",
    "educated at": "Where was {s} educated?",
    "award received": "Which award did {s} receive?",
    "occupation": "What is the occupation of {s}?",
    "position held": "Which position did {s} hold?",
    "member of political party": "Which political party is {s} a member of?",
    "member of sports team": "Which team did {s} play for?",
    "member of": "Which organisation is {s} a member of?",
    "record label": "Which record label released {s}?",
    "original broadcaster": "Which network first aired {s}?",
    "original network": "Which network first aired {s}?",
    "cast member": "Who starred in {s}?",
    "located in the administrative territorial entity": "Where is {s} located?",
    "location": "Where is {s} located?",
    "headquarters location": "Where is the headquarters of {s}?",
    "residence": "Where did {s} live?",
    "work location": "Where did {s} work?",
    "shares border with": "Which place shares a border with {s}?",
    "continent": "Which continent is {s} on?",
    "capital": "What is the capital of {s}?",
    "capital of": "What is {s} the capital of?",
    "located in or next to body of water": "Which body of water is {s} on?",
    "mouth of the watercourse": "Where does {s} flow into?",
    "part of": "What is {s} part of?",
    "instance of": "What is {s}?",
    "genre": "What genre is {s}?",
    "language of work or name": "What language is {s} in?",
    "original language of work": "What is the original language of {s}?",
    "languages spoken, written or signed": "Which language does {s} speak?",
    "official language": "What is the official language of {s}?",
    "religion": "What religion does {s} follow?",
    "military branch": "Which military branch did {s} serve in?",
    "conflict": "Which war did {s} take part in?",
    "league": "Which league does {s} play in?",
    "home venue": "What is the home venue of {s}?",
    "sport": "What sport does {s} play?",
    "position played on team / speciality": "What position does {s} play?",
    "parent organization": "What is the parent organization of {s}?",
    "subsidiary": "What is a subsidiary of {s}?",
    "head of government": "Who is the head of government of {s}?",
    "head of state": "Who is the head of state of {s}?",
    "chairperson": "Who chairs {s}?",
    "notable work": "What is a notable work of {s}?",
    "student of": "Whose student was {s}?",
    "doctoral advisor": "Who was the doctoral advisor of {s}?",
    "followed by": "What came after {s}?",
    "follows": "What came before {s}?",
    "replaces": "What did {s} replace?",
    "replaced by": "What replaced {s}?",
    "named after": "What is {s} named after?",
    "present in work": "Which work does {s} appear in?",
    "characters": "Which characters appear in {s}?",
    "platform": "Which platform does {s} run on?",
    "country for sport": "Which country does {s} play for?",
    "diplomatic relation": "Which country has diplomatic relations with {s}?",
    "applies to jurisdiction": "Which jurisdiction does {s} apply to?",
    "location of formation": "Where was {s} formed?",
    "contains administrative territorial entity": "Which place is part of {s}?",
    "original language of film or tv show": "What is the original language of {s}?",
    "has part": "What is a part of {s}?",
    "occupant": "Who uses {s}?",
    "main subject": "What is the main subject of {s}?",
    "located on terrain feature": "Which landform is {s} on?",
    "located on astronomical location": "Which astronomical body is {s} on?",
}

_ARROW = re.compile(r"^\s*(.+?)\s*>>\s*(.+?)\s*$")
_WH = frozenset("who whom whose what which where when why how".split())
_AUX = frozenset("is are was were do does did has have had can could will would should in on at from of to for by "
                 "name list".split())
_MONTHS = frozenset("january february march april may june july august september october november december".split())


def answer_kind(answer: str) -> str:
    """``"date"`` (a year, or a day or month of a year), ``"number"`` or ``"thing"``."""
    toks = tokens(answer)
    if not toks:
        return "thing"
    if any(t in _MONTHS or re.fullmatch(r"d\d{1,2}", t) for t in toks) and any(t.isdigit() for t in toks):
        return "date"
    if len(toks) == 1 and toks[0].isdigit():
        return "date" if 1000 <= int(toks[0]) <= 2100 and len(answer.strip()) == 4 else "number"
    return "thing"


def relation_question(subject: str, relation: str, answer: str = "") -> str:
    """The question of the triple (``subject``, ``relation``, ?) — see :data:`RELATIONS`."""
    rel = " ".join(relation.lower().split())
    template = RELATIONS.get(rel)
    if template is None:
        kind = answer_kind(answer)
        if kind == "date":
            template = "When is the " + rel + " of {s}?"
        elif kind == "number":
            template = "What is the " + rel + " of {s}?"
        elif rel.split()[-1] in ("by", "at", "in", "of", "with", "from", "to", "on"):
            template = "What is {s} " + rel + "?"
        else:
            template = "What is the " + rel + " of {s}?"
    return tidy(template.format(s=subject.strip()))


#: web-search leftovers at the end of a MuSiQue query: a site name ("answers.com", "wikipedia")
_WEB_TAIL = re.compile(r"(?:\s+(?:answers\.com|wiki\.answers|wikipedia))+\s*\??\s*$", re.IGNORECASE)
_ARTICLES = frozenset(("the", "a", "an"))


def tidy(text: str) -> str:
    """A query as a question: whitespace collapsed, no space before punctuation or a possessive
    ("John 's" -> "John's"), web-search leftovers dropped, a lone "i" written "I" (MuSiQue's
    "following #1 i" is "World War I" when #1 is "World War"), no doubled word (nor a doubled
    article or "I", "the The Bahamas", "World War I i"), capitalised, exactly one "?" at the end."""
    text = " ".join(text.replace("\u200b", " ").split()).strip(" \"'`")
    text = re.sub(r"\s+([?,.;:!])(?=\s|$)", r"\1", text)  # not ".dm" (a name that starts with a dot)
    text = re.sub(r"\s+(['’]s)\b", r"\1", text)
    if len(text.split()) > 2:
        text = _WEB_TAIL.sub("", text)
    words = [("I" if w == "i" else w) for w in text.split(" ")]
    out: list[str] = []
    for w in words:  # "the the"; a doubled capitalised word is a name ("Liar Liar", "Duran Duran")
        prev = out[-1].strip(",.;:").lower() if out else ""
        if out and (prev in _ARTICLES or prev == "i") and w.lower() == prev:  # "World War I i": one "I"
            out[-1] = w if out[-1][:1].islower() else out[-1]  # "of the The Bahamas" -> "of The Bahamas"
            continue
        if out and w.strip(",.;:") == out[-1].strip(",.;:") and w[:1].islower():
            continue
        out.append(w)
    text = " ".join(out).rstrip(" ?.!,;:")
    text = text.replace("?", "")
    return (text[:1].upper() + text[1:] + "?") if text else ""


_BE = frozenset("is are was were".split())
_PREPOSITIONS = frozenset("in on at by to of for from with into as about".split())


def _words(text: str) -> list[str]:
    return [w.lower().strip(",.;:?!\"'").removesuffix("'s").removesuffix("’s") for w in text.split()]


def as_question(text: str, answer: str = "") -> str:
    """A web-search statement as a question: "The capital of X is" -> "What is the capital of X?",
    "... was built in" -> "... was built in what?" ("When" for a date answer), a noun phrase
    "Country in the Pacific" -> "What is the country in the Pacific?"; text that already asks is
    returned as it is."""
    words = _words(text)
    if not words or words[0] in _WH or words[0] in _AUX or any(w in _WH for w in words):
        return text
    body = text.rstrip(" ?.!")
    last = words[-1]
    if last == "the" and len(words) > 1 and words[-2] in _PREPOSITIONS:
        body, last = body.rsplit(" ", 1)[0], words[-2]
    lead = body[:1].lower() + body[1:] if body[:1].isupper() and body[1:2].islower() else body
    if last in _BE:
        return f"What {last} {lead.rsplit(' ', 1)[0]}?"
    if last in _PREPOSITIONS:
        return f"{body} {'when' if answer_kind(answer) == 'date' else 'what'}?"
    noun = lead if lead.split(" ", 1)[0].lower() in ("the", "a", "an") else f"the {lead}"
    return f"What is {noun}?"


def natural_question(text: str, answer: str = "") -> str:
    """An annotated sub-question (references already filled in) as a natural question:
    ``subject >> relation`` through :func:`relation_question`, free text through
    :func:`as_question` and :func:`tidy`."""
    arrow = _ARROW.match(text)
    if arrow:
        return relation_question(arrow.group(1), arrow.group(2), answer)
    return tidy(as_question(tidy(text), answer))


def is_natural(question: str) -> str | None:
    """Why ``question`` does not read as a natural question, or None: it must start with a capital
    letter (or a digit), end with exactly one "?", have no doubled word, no relation shorthand
    (``>>``, a ``#k`` reference, "the founded by of"), and ask (a wh-word, or an auxiliary or
    preposition first)."""
    if not question or not (question[0].isupper() or question[0].isdigit()):
        return "not capitalised"
    if not question.endswith("?") or question.count("?") != 1:
        return "not exactly one '?' at the end"
    raw = [w.strip(",.;:?") for w in question.split()]
    if any(a == b and a[:1].islower() or a.lower() == b.lower() in _ARTICLES
           for a, b in zip(raw, raw[1:], strict=False)):
        return "a doubled word"
    words = _words(question)
    if ">>" in question or re.search(r"#\d", question):
        return "relation shorthand or an unresolved reference"
    if re.search(r"\s['’]s\b|\s[,.;:!?](?=\s|$)", question):
        return "a space before punctuation or a possessive"
    if re.search(r"\banswers\.com\b|\bwikipedia\s*\?$", question, re.IGNORECASE):
        return "a web-search leftover"
    if re.search(r"\bthe \w+ (?:by|at|in|of|with|to) of\b|\bthe (?:applies|contains|has|located|founded|owned) ",
                 question, re.IGNORECASE):
        return "a relation phrase used as a noun"
    if not (words[0] in _WH or words[0] in _AUX or any(w in _WH for w in words)):
        return "no question word"
    return None


__all__ = ["RELATIONS", "answer_kind", "relation_question", "tidy", "as_question", "natural_question", "is_natural"]
