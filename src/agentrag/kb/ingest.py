"""Corpus ingestion: FlashRAG ``{id, contents}``, ``{title, text}`` json/jsonl, and the pooled
context paragraphs of raw HotpotQA, 2WikiMultihopQA and MuSiQue files.

Every reader yields :class:`~agentrag.records.Passage` records. Malformed input raises
:class:`~agentrag.errors.UserError` naming ``file:line`` and the field. Passages of pooled
contexts get stable ids derived from a hash of ``(title, text)``, so the same paragraph gets the
same id in every file and every build (see :func:`passage_id`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from agentrag.errors import UserError
from agentrag.paths import check_input_file
from agentrag.records import Passage, iter_json_objects

CorpusFormat = Literal["auto", "flashrag", "title_text", "hotpotqa", "2wiki", "musique"]
FORMATS: tuple[str, ...] = ("auto", "flashrag", "title_text", "hotpotqa", "2wiki", "musique")
MULTIHOP_FORMATS = ("hotpotqa", "2wiki", "musique")


def passage_id(title: str, text: str) -> str:
    """The stable id of a passage: a hash of its (whitespace-normalised) title and text."""
    key = f"{' '.join(title.split())}\x00{' '.join(text.split())}"
    return "p" + hashlib.sha1(key.encode("utf-8")).hexdigest()[:16]


def _clean(s: str) -> str:
    return " ".join(s.split())


def _unquote_title(title: str) -> str:
    t = title.strip()
    if len(t) >= 2 and t[0] == t[-1] == '"':
        t = t[1:-1].strip()
    return t


def detect_format(obj: dict[str, Any], where: str) -> str:
    """Guess the format of a corpus/dataset file from its first record."""
    if "contents" in obj:
        return "flashrag"
    if "paragraphs" in obj and "question" in obj:
        return "musique"
    if "context" in obj and "supporting_facts" in obj:
        return "2wiki" if "evidences" in obj or "level" not in obj else "hotpotqa"
    if "text" in obj:
        return "title_text"
    raise UserError(f"{where}: cannot tell the corpus format from the keys {sorted(obj)}; expected "
                    "'contents' (FlashRAG), 'title'+'text', or a raw HotpotQA/2Wiki/MuSiQue record; "
                    "or pass the format explicitly")


def _iter_objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Objects of a ``.jsonl`` file, or of a ``.json`` file holding a list of objects."""
    if path.suffix == ".json":
        check_input_file(path)
        try:
            data = json.loads(path.read_bytes().decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise UserError(f"{path}: not valid UTF-8 (byte {exc.start})") from exc
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg} at column {exc.colno})") from exc
        if isinstance(data, dict):
            data = [data]
        if not isinstance(data, list):
            raise UserError(f"{path}: expected a JSON list of objects, got {type(data).__name__}")
        for i, obj in enumerate(data, start=1):
            if not isinstance(obj, dict):
                raise UserError(f"{path}:record {i}: expected a JSON object, got {type(obj).__name__}")
            yield i, obj
    else:
        yield from iter_json_objects(path)


def _str_field(obj: dict[str, Any], field: str, where: str, *, required: bool = True) -> str:
    if field not in obj:
        if required:
            raise UserError(f"{where}: missing field {field!r}")
        return ""
    value = obj[field]
    if isinstance(value, (int, float)) and field == "id":
        return str(value)
    if not isinstance(value, str):
        raise UserError(f"{where}: field {field!r} must be a string, got {type(value).__name__}")
    return value


def _sentences_text(sents: Any, where: str) -> str:
    if isinstance(sents, str):
        return _clean(sents)
    if not isinstance(sents, list) or not all(isinstance(s, str) for s in sents):
        raise UserError(f"{where}: field 'context' paragraphs must be [title, [sentences...]]")
    return " ".join(s.strip() for s in sents if s.strip())


def _paragraphs(fmt: str, obj: dict[str, Any], where: str) -> list[tuple[str, str, bool]]:
    """(title, text, is_gold) for the context paragraphs of one raw multi-hop question."""
    out: list[tuple[str, str, bool]] = []
    if fmt == "musique":
        paras = obj.get("paragraphs")
        if not isinstance(paras, list):
            raise UserError(f"{where}: missing field 'paragraphs' (a list)")
        for j, p in enumerate(paras):
            if not isinstance(p, dict):
                raise UserError(f"{where}: field 'paragraphs.{j}' must be an object")
            pw = f"{where}: paragraphs.{j}"
            out.append((_clean(_str_field(p, "title", pw)), _clean(_str_field(p, "paragraph_text", pw)),
                        bool(p.get("is_supporting", False))))
        return out
    ctx = obj.get("context")
    if not isinstance(ctx, list):
        raise UserError(f"{where}: missing field 'context' (a list of [title, sentences])")
    sf = obj.get("supporting_facts") or []
    if not isinstance(sf, list):
        raise UserError(f"{where}: field 'supporting_facts' must be a list of [title, sentence_id]")
    gold_titles = {str(f[0]) for f in sf if isinstance(f, list) and f}
    for j, item in enumerate(ctx):
        if not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str):
            raise UserError(f"{where}: field 'context.{j}' must be [title, [sentences...]]")
        title = _clean(item[0])
        out.append((title, _sentences_text(item[1], f"{where}: context.{j}"), item[0] in gold_titles))
    return out


def _question_id(obj: dict[str, Any], where: str) -> str:
    qid = obj.get("_id", obj.get("id"))
    if not isinstance(qid, (str, int)):
        raise UserError(f"{where}: missing field '_id' or 'id' (the question id)")
    return str(qid)


def file_format(path: str | os.PathLike[str]) -> str:
    """The format of a corpus/dataset file, detected from its first record."""
    p = Path(path)
    for lineno, obj in _iter_objects(p):
        return detect_format(obj, f"{p}:{lineno}")
    raise UserError(f"{p}: the file holds no records")


def read_corpus(path: str | os.PathLike[str], fmt: str = "auto") -> Iterator[Passage]:
    """Yield the passages of one corpus file (raw multi-hop files yield their context paragraphs).

    Passages of multi-hop files are not deduplicated here; :func:`pooled_passages` does that.
    """
    p = Path(path)
    if fmt not in FORMATS:
        raise UserError(f"unknown corpus format {fmt!r}; choose one of {', '.join(FORMATS)}")
    for lineno, obj in _iter_objects(p):
        where = f"{p}:{lineno}"
        if fmt == "auto":
            fmt = detect_format(obj, where)
        if fmt == "flashrag":
            pid = _str_field(obj, "id", where)
            contents = _str_field(obj, "contents", where)
            title, sep, text = contents.partition("\n")
            if not sep:
                title, text = "", contents
            title, text = _unquote_title(title), _clean(text)
            if not text:
                raise UserError(f"{where}: field 'contents' has an empty text")
            yield Passage(id=pid, title=_clean(title), text=text)
        elif fmt == "title_text":
            title = _clean(_str_field(obj, "title", where, required=False))
            text = _clean(_str_field(obj, "text", where))
            if not text:
                raise UserError(f"{where}: field 'text' is empty")
            pid = _str_field(obj, "id", where, required=False) or passage_id(title, text)
            yield Passage(id=pid, title=title, text=text)
        else:
            for j, (title, text, _gold) in enumerate(_paragraphs(fmt, obj, where)):
                if not text:
                    raise UserError(f"{where}: paragraph {j} ({title!r}) has an empty text")
                yield Passage(id=passage_id(title, text), title=title, text=text)


def pooled_passages(paths: Iterable[str | os.PathLike[str]], fmt: str = "auto") -> Iterator[Passage]:
    """The passages of several files, deduplicated on (title, text) (first occurrence wins)."""
    seen: set[str] = set()
    seen_ids: set[str] = set()
    for path in paths:
        for psg in read_corpus(path, fmt):
            key = passage_id(psg.title, psg.text)
            if key in seen:
                continue
            if psg.id in seen_ids:
                raise UserError(f"{path}: passage id {psg.id!r} is used by two different passages")
            seen.add(key)
            seen_ids.add(psg.id)
            yield psg


def _multihop_golds(path: str | os.PathLike[str], fmt: str, purpose: str
                    ) -> Iterator[tuple[str, dict[str, Any], list[str]]]:
    """(``file:line``, record, gold passage ids) for each question of a raw multi-hop file."""
    p = Path(path)
    for lineno, obj in _iter_objects(p):
        where = f"{p}:{lineno}"
        if fmt == "auto":
            fmt = detect_format(obj, where)
        if fmt not in MULTIHOP_FORMATS:
            raise UserError(f"{p}: {purpose} needs a raw HotpotQA/2Wiki/MuSiQue file, got format {fmt!r}")
        golds = [passage_id(t, x) for t, x, g in _paragraphs(fmt, obj, where) if g]
        yield where, obj, list(dict.fromkeys(golds))


def gold_passages(path: str | os.PathLike[str], fmt: str = "auto") -> dict[str, list[str]]:
    """Question id -> ids of its gold (supporting) passages, for a raw multi-hop file."""
    return {_question_id(obj, where): golds
            for where, obj, golds in _multihop_golds(path, fmt, "finding gold passages")}


def questions(path: str | os.PathLike[str], fmt: str = "auto") -> Iterator[tuple[str, str, list[str]]]:
    """(question id, question, gold passage ids) for each question of a raw multi-hop file."""
    for where, obj, golds in _multihop_golds(path, fmt, "recall evaluation"):
        yield _question_id(obj, where), _str_field(obj, "question", where), golds


__all__ = ["read_corpus", "file_format", "pooled_passages", "gold_passages", "questions", "passage_id", "detect_format",
           "FORMATS", "CorpusFormat"]
