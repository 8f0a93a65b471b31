"""§3.1: document sampling from a KB, overlap removal against existing benchmarks, type annotation.

Passages are shuffled with a seeded RNG; passages whose title occurs in an excluded benchmark file
(raw HotpotQA / 2WikiMultihopQA / MuSiQue contexts, FlashRAG ``metadata.supporting_titles``, or a
plain list of titles), that are shorter than ``sampling.min_chars`` or whose title is a number or a
year (:func:`is_number_page`) are skipped. The first
candidates are annotated with an entity type and a domain by the LLM; the selection then walks
them in shuffled order, keeping at most ``max_per_type`` per domain, until N documents are kept.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from agentrag.errors import UserError
from agentrag.records import Passage, iter_json_objects
from agentrag.synth.tracer.config import TracerConfig
from agentrag.synth.tracer.oracle import Oracle
from agentrag.synth.tracer.outputs import DocAnnotation
from agentrag.synth.tracer.prompts import ANNOTATE_SYSTEM
from agentrag.synth.tracer.schema import DocRecord

_NUMBER_TITLE = re.compile(r"^[\d\s.,\-–]+s?( (bc|bce|ad|ce))?( in .+)?$", re.IGNORECASE)


def norm_title(title: str) -> str:
    return " ".join(title.lower().split())


def is_number_page(title: str) -> bool:
    """A page about a number or a year ("1857", "1990s", "1857 in music"): dropped, as the released
    code does (its facts are lists of unrelated events, a poor seed and a poor bridge)."""
    return bool(_NUMBER_TITLE.match(title.strip()))


def _titles_of(obj: dict[str, Any], path: Path, lineno: int) -> list[str]:
    out: list[str] = []
    if isinstance(obj.get("context"), list):  # HotpotQA / 2Wiki: [[title, [sentences]], ...]
        for i, entry in enumerate(obj["context"]):
            if not (isinstance(entry, list) and entry and isinstance(entry[0], str)):
                raise UserError(f"{path}:{lineno}: field 'context[{i}]': expected [title, [sentences]]")
            out.append(entry[0])
    if isinstance(obj.get("paragraphs"), list):  # MuSiQue
        for i, p in enumerate(obj["paragraphs"]):
            if not (isinstance(p, dict) and isinstance(p.get("title"), str)):
                raise UserError(f"{path}:{lineno}: field 'paragraphs[{i}].title': expected a string")
            out.append(p["title"])
    meta = obj.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("supporting_titles"), list):
        out.extend(str(t) for t in meta["supporting_titles"])
    if isinstance(obj.get("title"), str):
        out.append(obj["title"])
    if not out:
        raise UserError(f"{path}:{lineno}: no titles found (expected field 'context', 'paragraphs', "
                        "'metadata.supporting_titles' or 'title')")
    return out


def excluded_titles(files: Iterable[str | Path]) -> set[str]:
    """Normalised titles occurring in the given benchmark files (jsonl records or one title a line)."""
    titles: set[str] = set()
    for f in files:
        p = Path(f)
        if not p.is_file():
            raise UserError(f"--exclude file {str(p)!r} not found")
        if p.suffix in (".jsonl", ".json"):
            for lineno, obj in iter_json_objects(p):
                titles.update(norm_title(t) for t in _titles_of(obj, p, lineno))
        else:
            titles.update(norm_title(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip())
    return titles


def doc_id(passage_id: str) -> str:
    return "d" + hashlib.sha1(passage_id.encode("utf-8")).hexdigest()[:10]


def candidates(passages: Sequence[Passage], cfg: TracerConfig, excluded: set[str]) -> list[DocRecord]:
    """The first ``docs`` (times ``oversample`` under a cap) eligible passages in seeded shuffled order."""
    order = list(range(len(passages)))
    random.Random(cfg.seed).shuffle(order)
    want = cfg.docs if cfg.sampling.max_per_type is None else int(cfg.docs * cfg.sampling.oversample + 0.999)
    out: list[DocRecord] = []
    for i in order:
        p = passages[i]
        if norm_title(p.title) in excluded or len(p.text) < cfg.sampling.min_chars or is_number_page(p.title):
            continue
        out.append(DocRecord(id=doc_id(p.id), passage_id=p.id, title=p.title, text=p.text, rank=len(out)))
        if len(out) >= want:
            break
    return out


def annotate(oracle: Oracle, doc: DocRecord) -> DocRecord:
    """Label the document's entity type and domain (unparsable output or a request over the context
    window is a flagged record; other LLM failures propagate)."""
    user = f"Title: {doc.title}\nPassage: {doc.text[:600]}"
    obj, prov, err = oracle.json(ANNOTATE_SYSTEM, user, DocAnnotation, name="doc_type", stage="sample",
                                 max_tokens=oracle.cfg.sampling.max_tokens)
    if err is not None or obj is None:
        return doc.model_copy(update={"status": "failed", "reason": err or "no output", "provenance": prov})
    return doc.model_copy(update={"entity_type": obj.entity_type.lower()[:40], "domain": obj.domain,
                                  "provenance": prov})


def select(docs: Sequence[DocRecord], n: int, max_per_type: int | None) -> list[DocRecord]:
    """Annotated documents in shuffled order, at most ``max_per_type`` per domain, up to ``n``."""
    kept: list[DocRecord] = []
    per: Counter[str] = Counter()
    for d in sorted(docs, key=lambda d: d.rank):
        if d.status != "ok":
            continue
        if max_per_type is not None and per[d.domain] >= max_per_type:
            continue
        per[d.domain] += 1
        kept.append(d)
        if len(kept) >= n:
            break
    return kept


__all__ = ["is_number_page", "excluded_titles", "candidates", "annotate", "select", "doc_id", "norm_title"]
