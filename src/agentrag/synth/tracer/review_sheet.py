"""The review sheet as one static HTML page a rater fills in with a browser only (§3.4).

Each item is a ``<section class="item">`` with the question and its golds, the chain hop by hop
(atomic question and answer, the composed question and answer at that hop, the hop's *full*
document and every gate's verdict with its reason), a Retain/Discard choice and a comment box.
The rater types a name; the Save button downloads ``labels-<rater>.csv`` with the columns
``id,decision,comment,rater`` (one row per item; undecided items have an empty decision), which
``agentrag synth tracer review --labels`` reads back. The page keeps the rater's name, decisions
and comments in the browser's ``localStorage`` under a key of the benchmark (:func:`benchmark_key`),
so a reload or a reopened page restores them, and it warns (``beforeunload``) before leaving
with decisions that differ from the last saved file. Record text only ever goes into the page
escaped; the script reads item ids from ``data-id`` attributes and never builds markup from text.
"""

from __future__ import annotations

import hashlib
import html
from collections.abc import Sequence
from typing import Any

_STYLE = (
    "body{font-family:sans-serif;max-width:70em;margin:auto;padding:0 1em}"
    ".item{border:1px solid #bbb;margin:1.2em 0;padding:.6em}.item.decided{border-color:#3a3}"
    "table{border-collapse:collapse;width:100%}td,th{border:1px solid #ddd;padding:4px;vertical-align:top}"
    ".doc{white-space:pre-wrap;max-height:24em;overflow:auto;font-size:.92em}"
    ".pass{color:#070}.fail{color:#b00}.notrun{color:#777}"
    "#bar{position:sticky;top:0;background:#f4f4f4;padding:.5em;border-bottom:1px solid #ccc;z-index:1}"
    "textarea{width:100%;min-height:3em}"
)

_SCRIPT = r"""
(function () {
  const items = Array.from(document.querySelectorAll("section.item"));
  const key = "agentrag-tracer-review:" + document.body.dataset.benchmark;
  const rater = document.getElementById("rater");
  function cell(v) { return '"' + String(v).replace(/"/g, '""') + '"'; }
  function decisionOf(sec) {
    const c = sec.querySelector("input.decision:checked");
    return c ? c.value : "";
  }
  function state() {
    const decisions = {};
    for (const sec of items) {
      const comment = sec.querySelector("textarea.comment").value;
      const d = decisionOf(sec);
      if (d || comment) decisions[sec.dataset.id] = {decision: d, comment: comment};
    }
    return {rater: rater.value, decisions: decisions};
  }
  function stored() {
    try { return JSON.parse(localStorage.getItem(key) || "null") || {}; } catch (e) { return {}; }
  }
  function store(exported) {
    const now = state();
    const saved = stored();
    now.exported = exported ? JSON.stringify(now.decisions) : (saved.exported || JSON.stringify({}));
    try { localStorage.setItem(key, JSON.stringify(now)); } catch (e) { /* storage full or disabled */ }
    return now;
  }
  function unsaved() {
    return JSON.stringify(state().decisions) !== (stored().exported || JSON.stringify({}));
  }
  function update() {
    let n = 0;
    for (const sec of items) {
      const d = decisionOf(sec) !== "";
      sec.classList.toggle("decided", d);
      if (d) n += 1;
    }
    document.getElementById("progress").textContent = n + " of " + items.length + " decided";
    document.getElementById("unsaved").textContent = unsaved() ? "unsaved decisions: press Save" : "";
  }
  function restore() {
    const saved = stored();
    if (typeof saved.rater === "string") rater.value = saved.rater;
    const decisions = saved.decisions || {};
    for (const sec of items) {
      const d = decisions[sec.dataset.id];
      if (!d) continue;
      for (const input of sec.querySelectorAll("input.decision")) input.checked = input.value === d.decision;
      sec.querySelector("textarea.comment").value = d.comment || "";
    }
  }
  function save() {
    const name = rater.value.trim() || "rater";
    const rows = [["id", "decision", "comment", "rater"].join(",")];
    for (const sec of items) {
      const comment = sec.querySelector("textarea.comment").value;
      rows.push([sec.dataset.id, decisionOf(sec), comment, name].map(cell).join(","));
    }
    const blob = new Blob([rows.join("\r\n") + "\r\n"], {type: "text/csv;charset=utf-8"});
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = "labels-" + name.replace(/[^A-Za-z0-9_.-]+/g, "_") + ".csv";
    document.body.appendChild(a);
    a.click();
    a.remove();
    store(true);
    update();
    document.getElementById("status").textContent = "saved " + a.download;
  }
  function changed() { store(false); update(); }
  restore();
  document.addEventListener("change", changed);
  document.addEventListener("input", changed);
  document.getElementById("save").addEventListener("click", save);
  window.addEventListener("beforeunload", function (e) {
    if (!unsaved()) return undefined;
    e.preventDefault();
    e.returnValue = "You have decisions that were not saved to a file.";
    return e.returnValue;
  });
  update();
  document.body.dataset.ready = "1";
})();
"""


def _check(c: dict[str, Any]) -> str:
    e = html.escape
    state, cls = ("pass", "pass") if c["passed"] else ("not run", "notrun") if c["passed"] is None else ("FAIL", "fail")
    extra = []
    if c.get("answer") is not None:
        extra.append(f"model answer: {c['answer']}")
    if c.get("judge_score") is not None:
        extra.append(f"judge {c['judge_score']}")
    if c.get("reason"):
        extra.append(str(c["reason"]))
    tail = f" — {e('; '.join(extra))}" if extra else ""
    return f"<li class='check {cls}' data-check='{e(c['name'])}'><b>{e(c['name'])}</b>: {state}{tail}</li>"


def _hop(h: dict[str, Any]) -> str:
    e = html.escape
    checks = "".join(_check(c) for c in h.get("checks", []))
    aliases = f" (also: {e(', '.join(h['aliases']))})" if h.get("aliases") else ""
    return (f"<tr class='hop' data-level='{int(h['level'])}'><td>hop {int(h['level'])}<br>{e(h['template'])}</td>"
            f"<td>atomic Q: {e(h['atomic_question'])}<br>atomic A: <i>{e(h['atomic_answer'])}</i><br>"
            f"Q at this hop: {e(h['question'])}<br>A: <i>{e(h['answer'])}</i>{aliases}"
            f"<ul class='verdicts'>{checks}</ul></td>"
            f"<td><b>{e(h['doc_title'])}</b> <small>({e(h['doc_id'])})</small>"
            f"<div class='doc'>{e(h['doc_text'])}</div></td></tr>")


def _item(n: int, item: dict[str, Any], hops: Sequence[dict[str, Any]]) -> str:
    e = html.escape
    m = item["metadata"]
    rows = "".join(_hop(h) for h in hops) or "<tr><td colspan='3'>chain record not found</td></tr>"
    return (f"<section class='item' id='item-{n}' data-id='{e(item['id'])}'>"
            f"<h3>{n + 1}. {e(item['id'])} — {int(m['hops'])}-hop {e(m['type'])}</h3>"
            f"<p><b>Question:</b> <span class='question'>{e(item['question'])}</span><br>"
            f"<b>Answer:</b> {e(' | '.join(item['golden_answers']))}</p>"
            "<table><tr><th>hop</th><th>questions, answers and verdicts</th><th>document (full text)</th></tr>"
            f"{rows}</table><fieldset><legend>Your decision</legend>"
            f"<label><input type='radio' class='decision' name='decision-{n}' value='Retain'> Retain</label> "
            f"<label><input type='radio' class='decision' name='decision-{n}' value='Discard'> Discard</label>"
            f"<label> Comment <textarea class='comment' name='comment-{n}'></textarea></label></fieldset></section>")


def benchmark_key(items: Sequence[tuple[dict[str, Any], Sequence[dict[str, Any]]]]) -> str:
    """The key under which the page keeps a rater's work in the browser: a hash of the items'
    ids and questions, so two benchmarks never share decisions and the same benchmark's sheet,
    written again, finds them."""
    h = hashlib.sha256()
    for it, _ in items:
        h.update(f"{it['id']}\x1f{it['question']}\x1e".encode())
    return h.hexdigest()[:20]


def sheet_html(items: Sequence[tuple[dict[str, Any], Sequence[dict[str, Any]]]]) -> str:
    """The page for ``items`` (each a benchmark item with its chain's hops up to its level)."""
    body = "\n".join(_item(n, it, hops) for n, (it, hops) in enumerate(items))
    return ("<!doctype html><html><head><meta charset='utf-8'><title>Tracer review sheet</title>"
            f"<style>{_STYLE}</style></head><body data-benchmark='{benchmark_key(items)}'><div id='bar'>"
            "<label>Your name <input id='rater' autocomplete='off'></label> <span id='progress'></span> "
            "<button id='save' type='button'>Save my decisions</button> <span id='status'></span> "
            "<b id='unsaved' class='fail'></b></div><h1>Tracer review sheet</h1>"
            "<p>For each item read the chain and its documents, then choose Retain or Discard (keep an item "
            "only if it is factual and faithful to the documents, fluent, every intermediate step is valid, "
            "and a comparison compares one dimension). A comment is optional. Save downloads your decisions "
            "as a file; give it to whoever runs <code>agentrag synth tracer review --labels FILE</code>. This browser "
            "keeps your name, decisions and comments for this benchmark (reloading or reopening the page "
            "restores them) and warns before you leave with decisions not yet saved to a file.</p>"
            f"<form id='sheet' onsubmit='return false'>{body}</form><script>{_SCRIPT}</script></body></html>")


__all__ = ["sheet_html", "benchmark_key"]
