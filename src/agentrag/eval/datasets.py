"""QA dataset loaders: FlashRAG jsonl and the raw HotpotQA / 2WikiMultihopQA / MuSiQue files.

``load_dataset(path, fmt="auto")`` returns :class:`~agentrag.records.QAItem` records. The format
is detected from the first record's keys (override with ``fmt``):

- ``flashrag``: ``{id, question, golden_answers, metadata?}``; gold passage ids (for recall) come
  from ``metadata.supporting_passage_ids`` (or ``supporting_doc_ids``, or a top-level
  ``supporting_passage_ids``);
- ``hotpotqa``: ``{_id, question, answer, type, level, supporting_facts, context}`` → hops = 2;
- ``2wiki``: ``{_id, type, question, answer, supporting_facts, evidences, context}`` → hops by
  type: comparison / compositional / inference = 2, bridge_comparison = 4 (the number of distinct
  supporting-fact titles, which agrees with the type on the shared data; unknown types fall back
  to that count);
- ``musique``: ``{id, question, answer, answer_aliases, paragraphs, question_decomposition}`` →
  hops = ``len(question_decomposition)``; the decomposition is kept in metadata, with the
  lower-hop questions used for MaxD (see :mod:`agentrag.eval.hops`).

``supporting_passage_ids`` of raw files come from :func:`agentrag.kb.ingest.gold_passages`: the
ids the knowledge base gives the gold paragraphs when it pools these files' contexts (a
``(title, text)`` hash), so recall is measured against a KB built from them. Metadata carries
``supporting_titles`` too (title recall).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentrag.errors import UserError
from agentrag.records import QAItem, iter_json_objects

FORMATS = ("flashrag", "hotpotqa", "2wiki", "musique")
RAW_FORMATS = ("hotpotqa", "2wiki", "musique")
TWOWIKI_HOPS = {"comparison": 2, "compositional": 2, "inference": 2, "bridge_comparison": 4}


def detect_format(obj: dict[str, Any], *, path: str | os.PathLike[str] = "<records>", lineno: int = 1) -> str:
    """The dataset format of one record, from its keys."""
    keys = set(obj)
    if {"question_decomposition", "paragraphs"} <= keys:
        return "musique"
    if {"_id", "evidences", "context"} <= keys:
        return "2wiki"
    if {"_id", "supporting_facts", "context"} <= keys:
        return "hotpotqa"
    if {"question", "golden_answers"} <= keys:
        return "flashrag"
    raise UserError(
        f"{path}:{lineno}: cannot tell the dataset format from the keys {sorted(keys)}; expected FlashRAG "
        "{id, question, golden_answers} or raw HotpotQA / 2WikiMultihopQA / MuSiQue records "
        f"(or name the format, one of {', '.join(FORMATS)}: `agentrag eval ... --set fmt=NAME`, or fmt=NAME "
        "in Python)")


class _Rec:
    """Field access on one raw record that fails with file:line:field."""

    def __init__(self, obj: dict[str, Any], path: str | os.PathLike[str], lineno: int):
        self.obj, self.path, self.lineno = obj, path, lineno

    def fail(self, field: str, why: str) -> UserError:
        return UserError(f"{self.path}:{self.lineno}: field {field!r}: {why}")

    def get(self, field: str, typ: type | tuple[type, ...], *, required: bool = True, default: Any = None) -> Any:
        if field not in self.obj:
            if required:
                raise self.fail(field, "missing")
            return default
        value = self.obj[field]
        if value is None and not required:
            return default
        if not isinstance(value, typ):
            names = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
            raise self.fail(field, f"expected {names}, got {type(value).__name__} {value!r:.60}")
        return value

    def text(self, field: str) -> str:
        value = self.get(field, (str, int, float))
        value = str(value)
        if not value.strip():
            raise self.fail(field, "empty")
        return value


def _context_passages(r: _Rec) -> dict[str, str]:
    """title -> paragraph text of a HotpotQA/2Wiki ``context`` ([[title, [sentences]]])."""
    out: dict[str, str] = {}
    for i, entry in enumerate(r.get("context", list)):
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and isinstance(entry[1], list)):
            raise r.fail(f"context[{i}]", "expected [title, [sentences]]")
        out[entry[0]] = "".join(str(s) for s in entry[1])
    return out


def _supporting_titles(r: _Rec) -> list[str]:
    titles: list[str] = []
    for i, sf in enumerate(r.get("supporting_facts", list)):
        if not (isinstance(sf, list) and sf and isinstance(sf[0], str)):
            raise r.fail(f"supporting_facts[{i}]", "expected [title, sentence_id]")
        if sf[0] not in titles:
            titles.append(sf[0])
    return titles


def _from_flashrag(r: _Rec) -> QAItem:
    golds = r.get("golden_answers", list)
    if not golds or not all(isinstance(g, (str, int, float)) for g in golds):
        raise r.fail("golden_answers", "expected a non-empty list of strings")
    meta = r.get("metadata", dict, required=False, default={}) or {}
    hops = meta.get("hops") if isinstance(meta.get("hops"), int) else None
    return QAItem(id=r.text("id"), question=r.text("question"), golden_answers=[str(g) for g in golds],
                  metadata=dict(meta), hops=hops, supporting_passage_ids=_flashrag_gold_ids(r, meta))


GOLD_ID_FIELDS = ("supporting_passage_ids", "supporting_doc_ids")


def _flashrag_gold_ids(r: _Rec, meta: dict[str, Any]) -> list[str]:
    """Gold passage ids a FlashRAG record carries: a top-level ``supporting_passage_ids``, else
    ``metadata.supporting_passage_ids`` or ``metadata.supporting_doc_ids`` (Tracer's export)."""
    for where, obj in (("", r.obj), ("metadata.", meta)):
        for name in GOLD_ID_FIELDS:
            ids = obj.get(name)
            if ids is None:
                continue
            if not isinstance(ids, list) or not all(isinstance(x, (str, int)) for x in ids):
                raise r.fail(where + name, f"expected a list of passage ids, got {ids!r:.60}")
            if ids:
                return [str(x) for x in ids]
    return []


def _from_hotpot_like(r: _Rec, fmt: str) -> QAItem:
    ctx = _context_passages(r)
    titles = _supporting_titles(r)
    qtype = r.get("type", str, required=(fmt == "2wiki"), default="")
    if fmt == "hotpotqa":
        hops = 2
    else:
        hops = TWOWIKI_HOPS.get(qtype, len(titles))
    meta: dict[str, Any] = {"source": fmt, "type": qtype, "supporting_titles": titles}
    if fmt == "hotpotqa":
        meta["level"] = r.get("level", str, required=False, default="")
    else:
        meta["evidences"] = r.get("evidences", list, required=False, default=[])
    missing = [t for t in titles if t not in ctx]
    if missing:
        raise r.fail("supporting_facts", f"titles {missing!r} are not in 'context'")
    return QAItem(id=r.text("_id"), question=r.text("question"), golden_answers=[r.text("answer")],
                  metadata=meta, hops=hops)


def _from_musique(r: _Rec) -> QAItem:
    paras = r.get("paragraphs", list)
    decomposition = r.get("question_decomposition", list)
    if not decomposition:
        raise r.fail("question_decomposition", "empty")
    subs = []
    for i, d in enumerate(decomposition):
        if not (isinstance(d, dict) and isinstance(d.get("question"), str) and "answer" in d):
            raise r.fail(f"question_decomposition[{i}]", "expected {question, answer, paragraph_support_idx}")
        subs.append({"question": d["question"], "answer": str(d["answer"]),
                     "paragraph_support_idx": d.get("paragraph_support_idx")})
    titles: list[str] = []
    for i, p in enumerate(paras):
        if not (isinstance(p, dict) and isinstance(p.get("paragraph_text"), str)):
            raise r.fail(f"paragraphs[{i}]", "expected {idx, title, paragraph_text, is_supporting}")
        if p.get("is_supporting"):
            titles.append(str(p.get("title", "")))
    aliases = r.get("answer_aliases", list, required=False, default=[])
    golds = [r.text("answer")] + [str(a) for a in aliases if str(a) != r.obj["answer"]]
    meta: dict[str, Any] = {"source": "musique", "type": f"{len(subs)}hop", "supporting_titles": titles,
                            "decomposition": subs,
                            "answerable": r.get("answerable", bool, required=False, default=True)}
    return QAItem(id=r.text("id"), question=r.text("question"), golden_answers=golds, metadata=meta,
                  hops=len(subs))


_CONVERTERS: dict[str, Callable[[_Rec], QAItem]] = {
    "flashrag": _from_flashrag,
    "hotpotqa": lambda r: _from_hotpot_like(r, "hotpotqa"),
    "2wiki": lambda r: _from_hotpot_like(r, "2wiki"),
    "musique": _from_musique,
}


def load_dataset(path: str | os.PathLike[str], fmt: str = "auto", limit: int | None = None) -> list[QAItem]:
    """Read a QA dataset file into QAItems (format detected from the first record unless ``fmt``)."""
    p = Path(path)
    if fmt != "auto" and fmt not in _CONVERTERS:
        raise UserError(f"unknown dataset format {fmt!r}; use auto or one of {', '.join(FORMATS)}")
    items: list[QAItem] = []
    seen: dict[str, int] = {}
    for lineno, obj in iter_json_objects(p):
        if limit is not None and len(items) >= limit:  # --limit 0 reads nothing
            break
        if fmt == "auto":
            fmt = detect_format(obj, path=p, lineno=lineno)
        item = _CONVERTERS[fmt](_Rec(obj, p, lineno))
        if item.id in seen:
            raise UserError(f"{p}:{lineno}: field 'id': duplicate id {item.id!r} (first on line {seen[item.id]})")
        seen[item.id] = lineno
        items.append(item)
    if not items:
        if limit == 0:
            return []
        raise UserError(f"{p}: no records")
    if fmt in RAW_FORMATS:
        # gold passage ids exactly as the KB assigns them to the pooled paragraphs of this file
        from agentrag.kb.ingest import gold_passages

        golds = gold_passages(p, fmt)
        items = [i.model_copy(update={"supporting_passage_ids": golds.get(i.id, [])}) for i in items]
    return items


__all__ = ["load_dataset", "detect_format", "FORMATS", "RAW_FORMATS", "TWOWIKI_HOPS"]
