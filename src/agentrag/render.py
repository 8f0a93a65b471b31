"""Markdown + HTML reports from sections (text, a table, an inline SVG), no dependencies.

``write_report(run_dir, title, sections)`` writes ``report.md`` and ``report.html`` into the run
directory and returns both paths. A section is a :class:`Section` (or a dict of its fields).
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from agentrag.errors import UserError, writing


class Section(BaseModel):
    """A report section: a heading, optional paragraph text, table and inline SVG figure."""

    title: str
    text: str = ""
    headers: list[str] = Field(default_factory=list)
    rows: list[list[Any]] = Field(default_factory=list)
    svg: str = ""
    caption: str = ""


def fmt_cell(value: Any) -> str:
    """Table cell text: floats with 3 decimals, ``None`` as a dash."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def bar_chart_svg(counts: Mapping[str, int | float], *, x_label: str = "", y_label: str = "count",
                  width: int = 480, height: int = 240) -> str:
    """A bar chart of ``counts`` (label → value) as a standalone inline SVG string."""
    return grouped_bar_chart_svg({"": counts}, x_label=x_label, y_label=y_label, width=width, height=height)


#: bar colours of the series of a grouped chart, in order
SERIES_COLOURS = ("#4878a8", "#d8743c", "#6a9f58", "#9c6ab0")


def _num(v: float) -> str:
    return str(int(v)) if not v % 1 else fmt_cell(v)


def grouped_bar_chart_svg(series: Mapping[str, Mapping[str, int | float]], *, x_label: str = "",
                          y_label: str = "count", width: int = 480, height: int = 240) -> str:
    """Bars of several series (series name → label → value) side by side per label, with a legend
    when there is more than one series, as a standalone inline SVG string. Labels are the union
    of every series' labels in first-seen order; a missing value is 0."""
    names = list(series)
    labels = list(dict.fromkeys(k for s in series.values() for k in s))
    top = max((float(v) for s in series.values() for v in s.values()), default=0.0) or 1.0
    pad_l, pad_b, pad_t, pad_r = 44, 40, 14 + (14 if len(names) > 1 else 0), 10
    plot_w, plot_h = width - pad_l - pad_r, height - pad_b - pad_t
    slot = plot_w / max(1, len(labels))
    bar_w = slot * 0.7 / max(1, len(names))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
             f'<line x1="{pad_l}" y1="{pad_t + plot_h}" x2="{width - pad_r}" y2="{pad_t + plot_h}" stroke="#333"/>',
             f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{pad_t + plot_h}" stroke="#333"/>',
             f'<text x="{pad_l - 6}" y="{pad_t + 4}" text-anchor="end">{fmt_cell(top) if top % 1 else int(top)}</text>',
             f'<text x="{pad_l - 6}" y="{pad_t + plot_h}" text-anchor="end">0</text>']
    for i, label in enumerate(labels):
        x0 = pad_l + i * slot + slot * 0.15
        for j, name in enumerate(names):
            v = float(series[name].get(label, 0))
            h = plot_h * v / top
            x, y = x0 + j * bar_w, pad_t + plot_h - h
            tip = f"{name} " if name else ""
            parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                         f'fill="{SERIES_COLOURS[j % len(SERIES_COLOURS)]}">'
                         f'<title>{html.escape(tip + str(label))}: {_num(v)}</title></rect>')
            parts.append(f'<text x="{x + bar_w / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle">{_num(v)}</text>')
        parts.append(f'<text x="{pad_l + i * slot + slot / 2:.1f}" y="{pad_t + plot_h + 14}" text-anchor="middle">'
                     f'{html.escape(str(label))}</text>')
    if len(names) > 1:
        for j, name in enumerate(names):
            x = pad_l + 8 + j * 110
            parts.append(f'<rect x="{x}" y="4" width="10" height="10" fill="{SERIES_COLOURS[j % len(SERIES_COLOURS)]}"/>'
                         f'<text x="{x + 14}" y="13">{html.escape(name)}</text>')
    if x_label:
        parts.append(f'<text x="{pad_l + plot_w / 2}" y="{height - 6}" text-anchor="middle">{html.escape(x_label)}</text>')
    if y_label:
        parts.append(f'<text x="12" y="{pad_t + plot_h / 2}" text-anchor="middle" '
                     f'transform="rotate(-90 12 {pad_t + plot_h / 2})">{html.escape(y_label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def to_markdown(title: str, sections: Sequence[Section]) -> str:
    lines = [f"# {title}", ""]
    for s in sections:
        lines += [f"## {s.title}", ""]
        if s.text:
            lines += [s.text, ""]
        if s.headers:
            lines.append("| " + " | ".join(_md_escape(h) for h in s.headers) + " |")
            lines.append("|" + "|".join("---" for _ in s.headers) + "|")
            for row in s.rows:
                lines.append("| " + " | ".join(_md_escape(fmt_cell(c)) for c in row) + " |")
            lines.append("")
        if s.svg:
            lines += [s.svg, ""]
            if s.caption:
                lines += [f"*{s.caption}*", ""]
    return "\n".join(lines)


_CSS = ("body{font-family:sans-serif;max-width:960px;margin:2em auto;padding:0 1em;color:#222}"
        "table{border-collapse:collapse;margin:0.5em 0 1.5em}th,td{border:1px solid #ccc;padding:4px 10px;"
        "text-align:right}th{background:#f0f0f0}td:first-child,th:first-child{text-align:left}"
        "figcaption{font-style:italic;color:#555}")


def to_html(title: str, sections: Sequence[Section]) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
           f"<h1>{html.escape(title)}</h1>"]
    for s in sections:
        out.append(f"<h2>{html.escape(s.title)}</h2>")
        if s.text:
            out.append(f"<p>{html.escape(s.text)}</p>")
        if s.headers:
            out.append("<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in s.headers)
                       + "</tr></thead><tbody>")
            for row in s.rows:
                out.append("<tr>" + "".join(f"<td>{html.escape(fmt_cell(c))}</td>" for c in row) + "</tr>")
            out.append("</tbody></table>")
        if s.svg:
            cap = f"<figcaption>{html.escape(s.caption)}</figcaption>" if s.caption else ""
            out.append(f"<figure>{s.svg}{cap}</figure>")
    out.append("</body></html>")
    return "\n".join(out)


def write_report(run_dir: str | os.PathLike[str], title: str,
                 sections: Sequence[Section | Mapping[str, Any]]) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html`` into ``run_dir``; returns their paths."""
    secs: list[Section] = []
    for i, s in enumerate(sections):
        if isinstance(s, Section):
            secs.append(s)
        elif isinstance(s, Mapping):
            try:
                secs.append(Section.model_validate(dict(s)))
            except ValueError as exc:
                raise UserError(f"report section {i}: {exc}") from exc
        else:
            raise UserError(f"report section {i}: expected a Section or a dict, got {type(s).__name__}")
    for s in secs:
        if any(len(r) != len(s.headers) for r in s.rows):
            raise UserError(f"report section {s.title!r}: every row needs {len(s.headers)} cells")
    d = Path(run_dir)
    d.mkdir(parents=True, exist_ok=True)
    md_path, html_path = d / "report.md", d / "report.html"
    for path, text in ((md_path, to_markdown(title, secs)), (html_path, to_html(title, secs))):
        tmp = path.with_name(path.name + ".tmp")
        with writing(path, tmp):
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
    return md_path, html_path


__all__ = ["Section", "write_report", "bar_chart_svg", "grouped_bar_chart_svg", "to_markdown", "to_html", "fmt_cell"]
