"""The page: one HTML file with the CSS, the script and the data inline (no network).

The table rows travel as plain JSON in ``<script type="application/json">`` (every ``<`` written
as ``\\u003c``, so no record text can close the element); the per-row details and the documents
as gzip + base64, decoded by the browser (``DecompressionStream``) the first time a row is
opened. A Content-Security-Policy allows only the page's own script (by its hash) and no
network, so record text is never executed even if it were mis-rendered; the script puts record
text into the page as text nodes only.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import html
import json
import logging
from importlib import resources
from typing import Any

from agentrag.render import fmt_cell
from agentrag.report.viewer.common import DOC_LIMITS, MAX_MB, Payload

log = logging.getLogger(__name__)


def json_for_html(obj: Any) -> str:
    """``obj`` as JSON safe inside a ``<script>`` element (``<`` escaped, non-ASCII kept)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


def packed(obj: Any) -> str:
    """``obj`` as gzip-compressed JSON in base64 (what the page's script unpacks)."""
    raw = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def _asset(name: str) -> str:
    return resources.files("agentrag.report.viewer").joinpath(name).read_text(encoding="utf-8")


def _summary_html(p: Payload) -> str:
    out = []
    for t in p.summary:
        out.append(f"<h3>{html.escape(str(t['title']))}</h3>")
        if t.get("text"):
            out.append(f"<p class=\"summary-text\">{html.escape(str(t['text']))}</p>")
        if t.get("headers"):
            out.append("<table class=\"summary\"><thead><tr>" + "".join(
                f"<th>{html.escape(str(h))}</th>" for h in t["headers"]) + "</tr></thead><tbody>")
            for row in t["rows"]:
                out.append("<tr>" + "".join(f"<td>{html.escape(fmt_cell(c))}</td>" for c in row) + "</tr>")
            if not t["rows"]:  # never a header-only table
                out.append(f'<tr class="empty"><td class="none" colspan="{len(t["headers"])}">none</td></tr>')
            out.append("</tbody></table>")
        if t.get("svg"):  # our own chart SVG (render.bar_chart_svg), its labels escaped there
            out.append(f'<figure class="chart">{t["svg"]}</figure>')
    return "".join(out) or "<p>No summary (metrics.json not written yet).</p>"


def _header_html(p: Payload) -> str:
    """The run header under the title: one ``label value`` pair per fact."""
    if not p.header:
        return ""
    return '<dl id="run-header">' + "".join(
        f'<div data-k="{html.escape(k)}"><dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd></div>'
        for k, v in p.header) + "</dl>"


def _charts_html(p: Payload) -> str:
    return "".join(f'<figure class="chart"><figcaption>{html.escape(c["title"])}</figcaption>{c["svg"]}</figure>'
                   for c in p.charts)


def fit_documents(p: Payload, doc_chars: int | None, max_mb: float) -> tuple[str, int | None, bool]:
    """The packed details and documents, the document limit used and whether the page fits:
    ``doc_chars`` when given (0: whole documents), else whole documents if the page stays under
    ``max_mb`` MB, otherwise the longest of :data:`DOC_LIMITS` that fits (the last one when none
    does)."""
    budget = max_mb * 1e6 - len(json_for_html(p.meta())) - 100_000  # the table, script and styles
    if doc_chars is not None:
        blob = packed(p.bulk(doc_chars or None))
        return blob, doc_chars or None, len(blob) <= budget
    blob = packed(p.bulk(None))
    if len(blob) <= budget:
        return blob, None, True
    # predict each limit's size from the compression of the whole documents, check the first that fits
    whole = sum(len(r[2] or "") for r in p.docs.rows)
    rest = len(json.dumps(p.details, ensure_ascii=False, separators=(",", ":")))
    per_char = len(blob) / max(1, whole + rest)
    for n in DOC_LIMITS:
        predicted = per_char * (rest + sum(min(len(r[2] or ""), n) for r in p.docs.rows))
        if predicted > budget and n != DOC_LIMITS[-1]:
            continue
        blob = packed(p.bulk(n))
        if len(blob) <= budget:
            return blob, n, True
    log.warning("the page is over %.1f MB even with documents cut at %d characters; `agentrag view --serve` "
                "serves large runs", max_mb, DOC_LIMITS[-1])
    return blob, DOC_LIMITS[-1], False


def _note(cut: int | None, fits: bool, auto: bool, text: int | None, max_mb: float) -> str:
    docs = ("Documents are shown whole." if cut is None else
            f"Documents are cut at {cut} characters" + (
                "." if not auto else f" (to keep this file under {max_mb:g} MB)." if fits else
                f", the shortest cut; this file is still over {max_mb:g} MB."))
    other = ("Other long texts are shown whole." if text is None else
             f"Other long texts (observations, thoughts, responses) are cut at {text} characters.")
    tail = "" if cut is None and text is None else \
        "The run's JSONL files hold them whole; `agentrag view --serve` shows them whole."
    return " ".join(x for x in (docs, other, tail) if x)


def render_page(p: Payload, *, detail_url: str | None = None, doc_chars: int | None = None,
                max_mb: float = MAX_MB) -> str:
    """The HTML of the page. With ``detail_url`` the records are fetched from it (``--serve``)
    instead of being embedded; otherwise documents are cut to fit ``max_mb`` (see
    :func:`fit_documents`; ``doc_chars`` fixes the limit, 0 keeps them whole)."""
    meta = p.meta()
    meta["detail_url"] = detail_url
    script = _asset("viewer.js")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    csp = (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:; "
           "connect-src 'self'")
    tabs = [("items", "Items"), ("summary", "Summary")] + ([("charts", "Charts")] if p.charts else [])
    blob, cut, fits = ("", None, True) if detail_url else fit_documents(p, doc_chars, max_mb)
    note = _note(cut, fits, doc_chars is None, p.limits.text_chars, max_mb)
    bulk = f'<script type="application/octet-stream" id="viewer-details">{blob}</script>' if blob else ""
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(csp, quote=False)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(p.title)}</title><style>{_asset('viewer.css')}</style></head>",
        f'<body data-kind="{html.escape(p.kind)}"><header><h1>{html.escape(p.title)}</h1><nav id="tabs">',
        "".join(f'<button type="button" data-tab="{k}">{v}</button>' for k, v in tabs),
        "</nav></header>", _header_html(p),
        f'<section id="tab-summary" class="tab" hidden>{_summary_html(p)}</section>',
        f'<section id="tab-charts" class="tab" hidden>{_charts_html(p)}</section>' if p.charts else "",
        '<section id="tab-items" class="tab"><div class="split"><div id="list"><div id="filters"></div>',
        '<div id="count"></div><table id="items"><thead></thead><tbody></tbody></table><div id="pager"></div></div>',
        '<div id="divider" role="separator" aria-orientation="vertical" title="drag to resize the list"></div>',
        '<aside id="detail"><p class="hint">Click a row to see its record.</p></aside></div></section>',
        f'<footer id="limits">{html.escape(note)}</footer>',
        f'<script type="application/json" id="viewer-data">{json_for_html(meta)}</script>', bulk,
        f"<script>{script}</script></body></html>\n"])


__all__ = ["render_page", "fit_documents", "json_for_html", "packed"]
