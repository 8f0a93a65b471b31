"""``build_payload`` (a run directory's data for the page) and ``write_viewer`` (the static page)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from agentrag.errors import UserError
from agentrag.report.viewer.common import DOC_CHARS, TEXT_CHARS, Limits, Payload
from agentrag.report.viewer.detect import detect_run_kind

log = logging.getLogger(__name__)

#: the default file name of the page inside the run directory
VIEWER_FILE = "viewer.html"


def _loader(kind: str) -> Callable[[Path, Limits], Payload]:
    if kind == "eval":
        from agentrag.report.viewer.eval_view import eval_payload
        return eval_payload
    if kind == "ragshaper":
        from agentrag.report.viewer.ragshaper_view import ragshaper_payload
        return ragshaper_payload
    if kind == "evipath":
        from agentrag.report.viewer.evipath_view import evipath_payload
        return evipath_payload
    if kind == "reasonrag":
        from agentrag.report.viewer.reasonrag_view import reasonrag_payload
        return reasonrag_payload
    from agentrag.report.viewer.tracer_view import tracer_payload
    return tracer_payload


def limits(doc_chars: int | None = DOC_CHARS, text_chars: int | None = TEXT_CHARS) -> Limits:
    """Text limits; ``None`` or 0 keeps the text whole, a negative limit is a UserError."""
    for name, v in (("doc_chars", doc_chars), ("text_chars", text_chars)):
        if v is not None and v < 0:
            raise UserError(f"{name} must be >= 0 (0: no limit), got {v!r}")
    return Limits(doc_chars or None, text_chars or None)


def build_payload(run_dir: str | os.PathLike[str], *, doc_chars: int | None = DOC_CHARS,
                  text_chars: int | None = TEXT_CHARS) -> Payload:
    """The page data of the run in ``run_dir`` (its kind detected from its files)."""
    d = Path(run_dir)
    kind = detect_run_kind(d)
    payload = _loader(kind)(d, limits(doc_chars, text_chars))
    log.info("%s run %s: %d rows", kind, d, len(payload.rows))
    return payload


def write_viewer(run_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *,
                 doc_chars: int | None = DOC_CHARS, text_chars: int | None = TEXT_CHARS) -> Path:
    """Write the run viewer of ``run_dir`` — one self-contained HTML file that opens from disk —
    to ``out`` (default ``<run_dir>/viewer.html``); returns its path. Documents are cut at
    ``doc_chars`` characters and other long texts at ``text_chars`` (0 or ``None``: whole)."""
    from agentrag.report.viewer.page import render_page

    page = render_page(build_payload(run_dir, doc_chars=doc_chars, text_chars=text_chars))
    target = Path(out) if out is not None else Path(run_dir) / VIEWER_FILE
    if target.is_dir():
        raise UserError(f"--out {str(target)!r} is a directory: name the HTML file to write")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, target)
    return target


__all__ = ["build_payload", "write_viewer", "VIEWER_FILE"]
