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
from importlib import resources
from typing import Any

from agentrag.report.render import fmt_cell
from agentrag.report.viewer.common import Payload


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
        out.append(f"<h3>{html.escape(str(t['title']))}</h3><table class=\"summary\"><thead><tr>"
                   + "".join(f"<th>{html.escape(str(h))}</th>" for h in t["headers"]) + "</tr></thead><tbody>")
        for row in t["rows"]:
            out.append("<tr>" + "".join(f"<td>{html.escape(fmt_cell(c))}</td>" for c in row) + "</tr>")
        out.append("</tbody></table>")
    return "".join(out) or "<p>No summary (metrics.json not written yet).</p>"


def _charts_html(p: Payload) -> str:
    return "".join(f'<figure class="chart"><figcaption>{html.escape(c["title"])}</figcaption>{c["svg"]}</figure>'
                   for c in p.charts)


def render_page(p: Payload, *, detail_url: str | None = None) -> str:
    """The HTML of the page; with ``detail_url`` the details are fetched from it (``--serve``)
    instead of being embedded."""
    meta = p.meta()
    meta["detail_url"] = detail_url
    script = _asset("viewer.js")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    csp = (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:; "
           "connect-src 'self'")
    tabs = [("items", "Items"), ("summary", "Summary")] + ([("charts", "Charts")] if p.charts else [])
    lim = p.limits
    note = ("Text is shown whole." if lim.doc_chars is None and lim.text_chars is None else
            f"Documents are cut at {lim.doc_chars} characters and other long texts at {lim.text_chars} "
            "(the run's JSONL files hold them whole; `agentrag view --serve` or --doc-chars 0 shows them whole).")
    bulk = "" if detail_url else (f'<script type="application/octet-stream" id="viewer-details">'
                                  f'{packed(p.bulk())}</script>')
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(csp, quote=False)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(p.title)}</title><style>{_asset('viewer.css')}</style></head>",
        f'<body data-kind="{html.escape(p.kind)}"><header><h1>{html.escape(p.title)}</h1><nav id="tabs">',
        "".join(f'<button type="button" data-tab="{k}">{v}</button>' for k, v in tabs),
        "</nav></header>",
        f'<section id="tab-summary" class="tab" hidden>{_summary_html(p)}</section>',
        f'<section id="tab-charts" class="tab" hidden>{_charts_html(p)}</section>' if p.charts else "",
        '<section id="tab-items" class="tab"><div class="split"><div id="list"><div id="filters"></div>',
        '<div id="count"></div><table id="items"><thead></thead><tbody></tbody></table><div id="pager"></div></div>',
        '<aside id="detail"><p class="hint">Click a row to see its record.</p></aside></div></section>',
        f"<footer>{html.escape(note)}</footer>",
        f'<script type="application/json" id="viewer-data">{json_for_html(meta)}</script>', bulk,
        f"<script>{script}</script></body></html>\n"])


__all__ = ["render_page", "json_for_html", "packed"]
