"""d_train = (q, a, F, F̂) from the raw HotpotQA, 2WikiMultihopQA and MuSiQue files (§3.2).

- HotpotQA / 2Wiki: F = every context sentence (title kept), F̂ = the ``supporting_facts``
  sentences; 2Wiki's ``evidences`` triples go to metadata: shown to the abductive planner and to
  f_QA, and used by Eq. 6 as a second view of the supporting sentences of their subject's page.
- MuSiQue: F = the 20 paragraphs, F̂ = those with ``is_supporting``; the question
  decomposition goes to metadata (used only by the gold fake in tests, never by the pipeline).

An item without gold evidence is a :class:`UserError` naming file:line and field, or, with
``skip_invalid``, an ``EviItem`` with ``status="skipped"`` and the reason (counted in the funnel).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from agentrag.errors import UserError
from agentrag.eval.datasets import RAW_FORMATS, TWOWIKI_HOPS, detect_format
from agentrag.paths import check_input_file
from agentrag.records import iter_json_objects
from agentrag.synth.evipath.schema import EviItem, Fact


class _Invalid(Exception):
    def __init__(self, field: str, why: str):
        super().__init__(f"field {field!r}: {why}")
        self.field, self.why = field, why


def _text(obj: dict[str, Any], field: str) -> str:
    value = obj.get(field)
    if not isinstance(value, (str, int, float)) or not str(value).strip():
        raise _Invalid(field, "missing or empty")
    return str(value)


def _hotpot_like(obj: dict[str, Any], fmt: str) -> dict[str, Any]:
    facts: list[Fact] = []
    where: dict[tuple[str, int], int] = {}
    context = obj.get("context")
    if not isinstance(context, list):
        raise _Invalid("context", "expected [[title, [sentences]], ...]")
    for c, entry in enumerate(context):
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], list)):
            raise _Invalid(f"context[{c}]", "expected [title, [sentences]]")
        for s, sent in enumerate(entry[1]):
            if str(sent).strip():
                where[(str(entry[0]), s)] = len(facts)
                facts.append(Fact(idx=len(facts), title=str(entry[0]), text=str(sent).strip()))
    sfs = obj.get("supporting_facts")
    if not isinstance(sfs, list) or not sfs:
        raise _Invalid("supporting_facts", "no gold evidence (empty or missing)")
    gold = []
    for i, sf in enumerate(sfs):
        key = (str(sf[0]), int(sf[1])) if isinstance(sf, list) and len(sf) == 2 and isinstance(sf[1], int) else None
        if key is None or key not in where:
            raise _Invalid(f"supporting_facts[{i}]", f"{sf!r} names no sentence of 'context'")
        if where[key] not in gold:
            gold.append(where[key])
    qtype = str(obj.get("type") or "")
    hops = 2 if fmt == "hotpotqa" else TWOWIKI_HOPS.get(qtype, len({sf[0] for sf in sfs}))
    meta: dict[str, Any] = {"type": qtype}
    if fmt == "2wiki" and isinstance(obj.get("evidences"), list):
        meta["evidences"] = [list(map(str, t)) for t in obj["evidences"] if isinstance(t, list)]
    answer = _text(obj, "answer")
    return {"id": _text(obj, "_id"), "question": _text(obj, "question"), "answer": answer, "answers": [answer],
            "facts": facts, "gold": gold, "hops": hops, "metadata": meta}


def _musique(obj: dict[str, Any]) -> dict[str, Any]:
    paras = obj.get("paragraphs")
    if not isinstance(paras, list) or not paras:
        raise _Invalid("paragraphs", "missing or empty")
    facts: list[Fact] = []
    gold: list[int] = []
    for i, p in enumerate(paras):
        if not (isinstance(p, dict) and isinstance(p.get("paragraph_text"), str)):
            raise _Invalid(f"paragraphs[{i}]", "expected {idx, title, paragraph_text, is_supporting}")
        if p.get("is_supporting"):
            gold.append(len(facts))
        facts.append(Fact(idx=len(facts), title=str(p.get("title") or ""), text=p["paragraph_text"].strip()))
    if not gold:
        raise _Invalid("paragraphs", "no gold evidence (no paragraph has is_supporting=true)")
    if obj.get("answerable") is False:
        raise _Invalid("answerable", "the item is unanswerable (MuSiQue-Full); it has no gold path")
    decomposition = obj.get("question_decomposition")
    decomposition = decomposition if isinstance(decomposition, list) else []
    answer = _text(obj, "answer")
    aliases = [str(a) for a in obj.get("answer_aliases") or [] if str(a) != answer]
    return {"id": _text(obj, "id"), "question": _text(obj, "question"), "answer": answer,
            "answers": [answer, *aliases], "facts": facts, "gold": gold, "hops": max(1, len(decomposition)),
            "metadata": {"decomposition": decomposition}}


def read_items(path: str | os.PathLike[str], *, skip_invalid: bool = False,
               limit: int | None = None) -> list[EviItem]:
    """The items of one raw file (format detected from the first record)."""
    return list(iter_items(path, skip_invalid=skip_invalid, limit=limit))


def iter_items(path: str | os.PathLike[str], *, skip_invalid: bool = False,
               limit: int | None = None) -> Iterator[EviItem]:
    """:func:`read_items` one item at a time (a run reads its datasets twice, holding none)."""
    p = check_input_file(path, "dataset")
    fmt = ""
    n = n_ok = 0
    seen: set[str] = set()
    for lineno, obj in iter_json_objects(p):
        if not fmt:
            fmt = detect_format(obj, path=p, lineno=lineno)
            if fmt not in RAW_FORMATS:
                raise UserError(f"{p}:{lineno}: EviPath needs gold evidence: pass raw HotpotQA, 2WikiMultihopQA "
                                f"or MuSiQue records (this file is {fmt})")
        try:
            fields = _musique(obj) if fmt == "musique" else _hotpot_like(obj, fmt)
        except _Invalid as exc:
            if not skip_invalid:
                raise UserError(f"{p}:{lineno}: {exc} (pass --skip-invalid to skip such items)") from None
            rid = str(obj.get("id") or obj.get("_id") or f"{p.stem}:{lineno}")
            n += 1
            yield EviItem(id=rid, question=str(obj.get("question") or ""), answer=str(obj.get("answer") or ""),
                          source=fmt, file=str(p), line=lineno, status="skipped", reason=f"invalid_input: {exc}")
            continue
        if fields["id"] in seen:
            raise UserError(f"{p}:{lineno}: field 'id': duplicate id {fields['id']!r}")
        seen.add(fields["id"])
        n += 1
        n_ok += 1
        yield EviItem(source=fmt, file=str(p), line=lineno, **fields)
        if limit is not None and n_ok >= limit:  # skipped ones do not count
            break
    if not n:
        raise UserError(f"{p}: no records")


__all__ = ["read_items", "iter_items"]
