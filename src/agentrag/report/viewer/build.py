"""``build_payload`` (a run directory's data for the page) and ``write_viewer`` (the static page)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from agentrag.errors import UserError, writing
from agentrag.report.viewer.common import MAX_MB, TEXT_CHARS, Limits, Payload
from agentrag.report.viewer.detect import detect_run_kind

log = logging.getLogger(__name__)

#: the default file name of the page inside the run directory
VIEWER_FILE = "viewer.html"


def _loader(kind: str) -> Callable[[Path, Limits], Payload]:
    """The page-data loader of ``kind``: eval's, or the one a synthesizer declares (``viewer``)."""
    import importlib

    if kind == "eval":
        from agentrag.report.viewer.eval_view import eval_payload
        return eval_payload
    if kind == "suite":
        from agentrag.report.viewer.suite_view import suite_payload
        return suite_payload
    from agentrag.synth.registry import synthesizer_class

    where = synthesizer_class(kind).viewer
    if not where:
        raise UserError(f"{kind} runs have no viewer page (no page-data loader is declared)")
    module, _, fn = where.partition(":")
    return getattr(importlib.import_module(module), fn)  # type: ignore[no-any-return]


def _run_parts(payload: Payload, kind: str, run_dir: Path) -> None:
    """The run header and (synthesizers) every section of the run's report in the Summary tab."""
    from agentrag.report.viewer.common import read_config, read_json
    from agentrag.report.viewer.header import run_header, synth_summary

    config, metrics = read_config(run_dir), read_json(run_dir, "suite.json" if kind == "suite" else "metrics.json")
    per_record = [d["usage"] for d in payload.details if isinstance(d.get("usage"), list)]
    payload.header = run_header(kind, config, metrics, per_record)
    payload.summary += synth_summary(kind, metrics, {str(t.get("title")) for t in payload.summary})


def build_payload(run_dir: str | os.PathLike[str], *, text_chars: int | None = TEXT_CHARS) -> Payload:
    """The page data of the run in ``run_dir`` (its kind detected from its files); long texts other
    than documents are cut at ``text_chars`` characters (0 or ``None``: whole)."""
    if text_chars is not None and text_chars < 0:
        raise UserError(f"text_chars must be >= 0 (0: whole texts), got {text_chars!r}")
    d = Path(run_dir)
    kind = detect_run_kind(d)
    payload = _loader(kind)(d, Limits(text_chars or None))
    _run_parts(payload, kind, d)
    log.info("%s run %s: %d rows, %d distinct documents", kind, d, len(payload.rows), len(payload.docs.rows))
    return payload


#: what every viewer page holds (its data block): an existing file without it is not a viewer page
VIEWER_MARK = b'id="viewer-data"'


def is_viewer_page(path: Path) -> bool:
    """Whether ``path`` is a page this viewer wrote (it may be replaced without --force)."""
    try:
        with path.open("rb") as f:
            return VIEWER_MARK in f.read()
    except OSError:
        return False


def write_viewer(run_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *,
                 doc_chars: int | None = None, text_chars: int | None = TEXT_CHARS, max_mb: float = MAX_MB,
                 force: bool = False) -> Path:
    """Write the run viewer of ``run_dir`` — one self-contained HTML file that opens from disk —
    to ``out`` (default ``<run_dir>/viewer.html``); returns its path.

    Documents are kept whole when the file stays under ``max_mb`` MB, else cut at the longest
    limit that fits (``doc_chars`` fixes the limit; 0 keeps them whole); other long texts are cut
    at ``text_chars`` characters (0 or ``None``: whole). An existing ``out`` that is not a viewer
    page is refused unless ``force``."""
    from agentrag.report.viewer.page import render_page

    if doc_chars is not None and doc_chars < 0:
        raise UserError(f"doc_chars must be >= 0 (0: whole documents), got {doc_chars!r}")
    if max_mb <= 0:
        raise UserError(f"max_mb must be > 0, got {max_mb!r}")
    target = Path(out) if out is not None else Path(run_dir) / VIEWER_FILE
    if target.is_dir():
        raise UserError(f"--out {str(target)!r} is a directory: name the HTML file to write")
    if target.exists() and not force and not is_viewer_page(target):
        raise UserError(f"--out {target} exists and is not a viewer page; it is not overwritten (name another "
                        "file, or pass --force to replace it)")
    page = render_page(build_payload(run_dir, text_chars=text_chars), doc_chars=doc_chars, max_mb=max_mb)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    with writing(target, tmp):
        tmp.write_text(page, encoding="utf-8")
        os.replace(tmp, target)
    return target


__all__ = ["build_payload", "write_viewer", "is_viewer_page", "VIEWER_FILE"]
