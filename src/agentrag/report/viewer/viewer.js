"use strict";
// agentrag run viewer: table (filter, sort, pages of 100 rows) + the record of the clicked row.
// Record text only ever enters the page as text nodes (h() below); nothing is parsed as HTML.
(function () {
  const META = JSON.parse(document.getElementById("viewer-data").textContent);
  const PAGE_SIZE = 100;
  const COLS = META.columns;
  const KEY = {};
  COLS.forEach((c, i) => { KEY[c.key] = i; });
  const state = { sort: -1, dir: 1, page: 0, filters: {}, text: "", view: [], selected: -1 };

  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") el.className = v;
      else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? "" : String(v));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false) continue;
      el.append(kid instanceof Node ? kid : String(kid));
    }
    return el;
  }
  function fmt(v, type) {
    if (v === null || v === undefined || v === "") return "–";
    if (type === "bool" || typeof v === "boolean") return v ? "✓" : "✗";
    if (typeof v === "number" && !Number.isInteger(v)) return v.toFixed(3);
    return String(v);
  }
  function cmp(a, b, type) {
    const na = a === null || a === undefined, nb = b === null || b === undefined;
    if (na || nb) return na === nb ? 0 : na ? 1 : -1;
    if (type === "num" || type === "bool") return Number(a) - Number(b);
    return String(a).localeCompare(String(b));
  }

  // ---- table -------------------------------------------------------------------------------
  function keep(row) {
    for (const f of META.filters) {
      const want = state.filters[f.key];
      if (want === undefined || want === "" || want === false) continue;
      const cell = row[KEY[f.key]];
      if (f.kind === "failures") { if (cell === true) return false; } else if (String(cell) !== want) return false;
    }
    if (state.text) {
      const q = state.text.toLowerCase();
      if (!row.some((c) => c !== null && String(c).toLowerCase().includes(q))) return false;
    }
    return true;
  }
  function applyView() {
    const idx = [];
    for (let i = 0; i < META.rows.length; i++) if (keep(META.rows[i])) idx.push(i);
    if (state.sort >= 0) {
      const k = state.sort, t = COLS[k].type;
      idx.sort((a, b) => cmp(META.rows[a][k], META.rows[b][k], t) * state.dir || a - b);
    }
    state.view = idx;
    state.page = Math.max(0, Math.min(state.page, Math.ceil(idx.length / PAGE_SIZE) - 1));
    renderTable();
  }
  // ---- columns shown: a column empty in every row starts hidden (e.g. judge without a judge; not a key
  // column), as do
  // the ones the page marks optional; the "columns" menu shows or hides any (kept for the next visit)
  const COLS_KEY = "agentrag-cols-" + META.kind;
  const hidden = new Set();
  (function initHidden() {
    const saved = localStorage.getItem(COLS_KEY);
    if (saved) { try { JSON.parse(saved).forEach((k) => hidden.add(k)); return; } catch (e) { /* ignore */ } }
    COLS.forEach((c, k) => {
      const empty = META.rows.length > 0 && META.rows.every((r) => r[k] === null || r[k] === undefined || r[k] === "");
      if (c.optional || (empty && !c.pin)) hidden.add(c.key);  // a key column stays, "–" everywhere says something
    });
  })();
  const shown = () => COLS.map((c, k) => k).filter((k) => !hidden.has(COLS[k].key));
  function renderColumns() {
    const menu = h("div", { class: "menu" }, COLS.map((c) => h("label", null, h("input", { type: "checkbox", "data-col": c.key,
      checked: !hidden.has(c.key), onchange: (e) => {
        if (e.target.checked) hidden.delete(c.key); else hidden.add(c.key);
        localStorage.setItem(COLS_KEY, JSON.stringify([...hidden]));
        renderHead(); renderTable();
      } }), " " + c.label)));
    return h("details", { id: "columns" }, h("summary", null, "columns"), menu);
  }
  function renderHead() {
    const tr = h("tr", null, shown().map((k) => [COLS[k], k]).map(([c, k]) => h("th", {
      class: "sortable" + (c.pin ? " key" : "") + (state.sort === k ? (state.dir > 0 ? " asc" : " desc") : ""), "data-key": c.key,
      onclick: () => { state.dir = state.sort === k ? -state.dir : 1; state.sort = k; renderHead(); applyView(); },
      title: c.label,
    }, c.label)));
    // fixed layout: every shown column fits the list pane (numbers narrow, key texts share the rest);
    // a cell cut by its width carries its whole text as a tooltip
    const widths = shown().map((k, n) => {
      const c = COLS[k];
      if (n === 0 && c.type === "text") return "4.6em";
      if (c.type === "num" || c.type === "bool") return "3.3em";
      return c.pin ? null : "6em";
    });
    const group = h("colgroup", null, widths.map((w) => h("col", { style: w ? "width:" + w : null })));
    const table = document.getElementById("items");
    const old = table.querySelector("colgroup");
    if (old) old.replaceWith(group); else table.prepend(group);
    document.querySelector("#items thead").replaceChildren(tr);
  }
  function renderTable() {
    const start = state.page * PAGE_SIZE, rows = state.view.slice(start, start + PAGE_SIZE);
    const okIdx = KEY.ok;
    const body = rows.map((i) => {
      const row = META.rows[i];
      const cls = (okIdx !== undefined ? (row[okIdx] === true ? "ok" : "fail") : "") + (i === state.selected ? " selected" : "");
      return h("tr", { class: cls, "data-row": i, onclick: () => openDetail(i) },
        shown().map((k) => {
          const text = fmt(row[k], COLS[k].type);
          // a cell cut by its width shows its whole text on hover
          return h("td", { class: "c-" + COLS[k].type + (COLS[k].pin ? " c-key" : ""), title: text.length > 8 ? text : null }, text);
        }));
    });
    if (!body.length) {
      const filtered = state.text || Object.values(state.filters).some((v) => v !== undefined && v !== "" && v !== false);
      body.push(h("tr", { class: "empty" }, h("td", { class: "none", colspan: Math.max(1, shown().length) },
        filtered ? "none (no row matches the filters)" : "none")));
    }
    document.querySelector("#items tbody").replaceChildren(...body);
    const pages = Math.max(1, Math.ceil(state.view.length / PAGE_SIZE));
    document.getElementById("count").textContent = state.view.length + " of " + META.rows.length + " rows";
    document.getElementById("pager").replaceChildren(
      h("button", { type: "button", id: "prev", disabled: state.page === 0, onclick: () => { state.page--; renderTable(); } }, "◀ prev"),
      h("span", null, " page " + (state.page + 1) + " of " + pages + " "),
      h("button", { type: "button", id: "next", disabled: state.page >= pages - 1, onclick: () => { state.page++; renderTable(); } }, "next ▶"));
  }
  function renderFilters() {
    const parts = [];
    for (const f of META.filters) {
      if (f.kind === "failures") {
        parts.push(h("label", null, h("input", { type: "checkbox", id: "filter-" + f.key,
          onchange: (e) => { state.filters[f.key] = e.target.checked; state.page = 0; applyView(); } }), " " + f.label));
      } else {
        const values = [...new Set(META.rows.map((r) => String(r[KEY[f.key]])))].sort((a, b) => cmp(a, b, isNaN(a) ? "text" : "num"));
        parts.push(h("label", null, f.label + " ", h("select", { id: "filter-" + f.key,
          onchange: (e) => { state.filters[f.key] = e.target.value; state.page = 0; applyView(); } },
          h("option", { value: "" }, "all"), values.map((v) => h("option", { value: v, title: v },
            v === "null" ? "–" : v.length > 40 ? v.slice(0, 39) + "…" : v)))));
      }
    }
    parts.push(h("input", { type: "search", id: "filter-text", placeholder: "search rows",
      oninput: (e) => { state.text = e.target.value; state.page = 0; applyView(); } }));
    parts.push(renderColumns());
    document.getElementById("filters").replaceChildren(...parts);
  }

  // ---- details -----------------------------------------------------------------------------
  let bulk = null;
  function loadBulk() {
    if (!bulk) {
      const bin = atob(document.getElementById("viewer-details").textContent.trim());
      const bytes = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      bulk = new Response(stream).text().then((t) => JSON.parse(t));
    }
    return bulk;
  }
  function getDetail(i) {
    if (META.detail_url) {
      return fetch(META.detail_url + i).then((r) => { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); });
    }
    return loadBulk().then((b) => ({ d: b.details[i], docs: b.docs }));
  }
  function openDetail(i) {
    state.selected = i;
    document.querySelectorAll("#items tbody tr").forEach((tr) => tr.classList.toggle("selected", Number(tr.dataset.row) === i));
    const pane = document.getElementById("detail");
    pane.replaceChildren(h("p", { class: "hint" }, "loading…"));
    const id = KEY.id !== undefined ? META.rows[i][KEY.id] : String(i);
    history.replaceState(null, "", "#item=" + encodeURIComponent(id));
    getDetail(i).then((x) => {
      pane.replaceChildren(h("div", { class: "record", "data-row": i }, RENDER[META.kind](x.d, x.docs)));
      document.body.dataset.detail = String(i);
    }).catch((err) => pane.replaceChildren(h("p", { class: "error" }, "could not load the record: " + err)));
  }

  function kv(pairs) {
    return h("table", { class: "kv" }, pairs.filter((p) => p[1] !== undefined).map(([k, v, cls]) =>
      h("tr", { class: cls || null }, h("th", null, k), h("td", null, v instanceof Node ? v : fmt(v)))));
  }
  function block(label, text, cls) {
    if (text === null || text === undefined || text === "") return null;
    return h("div", { class: "block " + (cls || "") }, h("span", { class: "label" }, label), h("pre", null, text));
  }
  function badge(text, cls, attrs) { return h("span", Object.assign({ class: "badge " + (cls || "") }, attrs || {}), text); }
  function verdict(v) { return v === true ? badge("✓ pass", "pass") : v === false ? badge("✗ fail", "fail") : badge("– not run", "skip"); }
  const MARKS = ["", "gold", "has-answer"];
  const MARK_LABEL = ["", "gold passage", "contains a gold answer"];
  function doc(docs, idx, score, mark) {
    const [id, title, text, kb, dtype] = docs[idx];
    return h("div", { class: "doc " + (MARKS[mark || 0] || ""), "data-doc": id, "data-dtype": dtype || null },
      h("div", { class: "doc-head" }, h("b", null, title || "(untitled)"), " ", badge(id, "id"),
        kb && kb !== "main" ? badge("kb " + kb, "kb") : null, dtype ? badge("distractor: " + dtype, "dtype", { "data-dtype": dtype }) : null,
        mark ? badge(MARK_LABEL[mark], MARKS[mark]) : null, score !== null && score !== undefined ? badge("score " + fmt(score), "score") : null),
      h("div", { class: "doc-text" }, text));
  }
  function trajectory(t, docs) {
    return h("ol", { class: "steps" }, (t.steps || []).map((s, n) => h("li", { class: "step" + (s.err ? " has-error" : "") },
      h("div", { class: "step-head" }, h("b", null, "step " + (n + 1)), s.tool ? [" · ", h("code", { class: "tool" }, s.tool + "(" + (s.args || "") + ")")] : null,
        " · ", badge((s.usage || [0, 0])[0] + " + " + (s.usage || [0, 0])[1] + " tokens", "usage"), " ", badge(fmt(s.lat) + " s", "latency")),
      s.rs ? h("details", { class: "reasoning" }, h("summary", null, "reasoning (" + s.rs.length + " chars)"), h("pre", null, s.rs)) : null,
      block("thought", s.th, "thought"),
      (s.hits || []).length ? h("div", { class: "hits" }, s.hits.map(([i, score, mark]) => doc(docs, i, score, mark))) : null,
      block("observation", s.obs, "obs"), block("error", s.err, "error"), block("raw output", s.raw, "raw"))));
  }
  function treeOf(nodes, head, body) {
    const kids = {};
    let roots = [];
    const ids = new Set(nodes.map((n) => n.id));
    for (const n of nodes) {
      if (n.parent === null || n.parent === undefined || !ids.has(n.parent)) roots.push(n);
      else (kids[n.parent] = kids[n.parent] || []).push(n);
    }
    function li(n) {
      const ch = kids[n.id] || [];
      return h("li", { class: "node", "data-node": n.id },
        h("details", { open: true }, h("summary", null, head(n)), body(n), ch.length ? h("ul", { class: "tree" }, ch.map(li)) : null));
    }
    return h("ul", { class: "tree root" }, roots.map(li));
  }

  const RENDER = {
    eval(d, docs) {
      const golds = (d.gold_docs || []).map((g, k) => g === null || g === undefined
        ? h("div", { class: "doc gold" }, badge((d.gold_ids || [])[k], "id"), " text not available (the run's KB is not readable here)")
        : doc(docs, g, null, 1));
      return [h("h2", null, d.question),
        d.help ? h("div", { class: "help" }, h("b", null, "what would have helped: "), d.help) : null,
        block("raw model output (last failed step)", d.raw_output, "raw"),
        kv([["prediction", d.prediction, d.scores.correct === true ? "right" : "wrong"], ["gold answers", (d.golds || []).join(" | ")],
          ["hops", d.hops], ["finish reason", d.finish], ["agent", d.agent], ["model", d.model],
          ["tokens (prompt + completion, calls)", d.usage ? d.usage[0] + " + " + d.usage[1] + " (" + d.usage[2] + " calls)" : undefined],
          ["seconds", d.elapsed], ["top-k per step", (d.topk || []).join(", ")], ["gold passage ids", (d.gold_ids || []).join(", ")],
          d.parent ? ["lower-hop question of", d.parent + " (level " + d.level + ")"] : ["", undefined]]),
        h("h3", null, "Scores"), kv(Object.entries(d.scores)),
        golds.length ? [h("h3", null, "Gold passages"), h("div", { class: "gold-docs" }, golds)] : null,
        h("h3", null, "Trajectory"), d.steps ? trajectory(d, docs) : h("p", null, "no trajectory recorded")];
    },
    ragshaper(d, docs) {
      const nodeHead = (n) => [badge("d" + n.depth, "depth"), " ", n.tool ? h("code", { class: "tool" }, n.tool + "(" + (n.args || "") + ")") : h("b", null, d.seed),
        n.dtype ? [" ", badge(n.dtype, "dtype", { "data-dtype": n.dtype })] : null,
        n.paths.map((r) => [" ", badge("path #" + (r + 1), "path")]), n.err ? [" ", badge("error", "fail")] : null];
      const nodeBody = (n) => h("div", { class: "node-body" + (n.paths.length ? " on-path" : ""), "data-dtype": n.dtype || null },
        block("intent", n.intent), block("observation", n.obs), block("error", n.err, "error"),
        n.repaired.length ? block("repaired", n.repaired.join("\n")) : null,
        n.docs.length ? h("div", { class: "hits" }, n.docs.map(([i, score]) => doc(docs, i, score, 0))) : null);
      const tree = d.nodes.length ? treeOf(d.nodes, nodeHead, nodeBody) : h("p", null, "no tree yet");
      tree.querySelectorAll("li.node").forEach((li) => {
        const n = d.nodes.find((x) => x.id === li.dataset.node);
        if (n && n.paths.length) li.classList.add("on-path");
        if (n && n.dtype) li.dataset.dtype = n.dtype;
      });
      return [h("h2", null, "Seed: " + d.seed), kv([["tree", d.status], ["error", d.error || undefined], ["distractor tool calls", d.distractor_calls]]),
        h("h3", null, "Information tree"), legend(), tree,
        h("h3", null, "Selected paths (Eq. 5)"), h("ol", { class: "paths" }, d.paths.map((p) => h("li", null, "score " + p.score + ": " + p.nodes.join(" → ")))),
        h("h3", null, "Questions and teacher trajectories"),
        d.qa.map((q) => h("div", { class: "qa " + q.status },
          q.help ? h("div", { class: "help" }, h("b", null, "what would have helped: "), q.help) : null,
          kv([["question", q.question], ["answer", q.answer], ["status", q.status + (q.reason ? ": " + q.reason : ""), q.status === "accepted" ? "right" : "wrong"],
            ["path", q.path], ["filter", q.filter ? "F1 " + fmt(q.filter.f1) + (q.filter.kept ? " kept" : " dropped") + " · prediction: " + fmt(q.filter.prediction) : undefined, q.filter && q.filter.kept ? "right" : "wrong"],
            ["behaviour tag", q.tag ? q.tag.tag + " (rule: " + q.tag.rule + ") " + q.tag.why : undefined]]),
          q.reasoning.length ? block("reasoning steps", q.reasoning.join("\n")) : null,
          q.status !== "accepted" ? block("raw model output", q.raw, "raw") : null,
          q.traj ? h("details", { class: "traj" }, h("summary", null, "teacher trajectory (" + q.traj.steps.length + " steps, " + q.traj.finish + ")"), trajectory(q.traj, docs)) : null))];
    },
    evipath(d) {
      const left = [h("h3", null, "Plan (Eq. 3)"), d.plan ? [kv([["status", d.plan.status + (d.plan.reason ? ": " + d.plan.reason : "")]]),
        h("ol", { class: "plan" }, d.plan.steps.map((s) => h("li", null, s)))] : h("p", null, "no plan yet"),
      h("h3", null, "Iterations (Eq. 4–5)"), d.iterations.map((it) => h("div", { class: "iteration " + it.status },
        h("div", { class: "step-head" }, h("b", null, "iteration " + it.n), it.last ? [" ", badge("last", "path")] : null, it.status !== "ok" ? [" ", badge(it.status + ": " + it.reason, "fail")] : null),
        block("thought R_i", it.thought), it.actions.length ? block("actions Q_i", it.actions.join("\n")) : null,
        it.observations.length ? block("observations", it.observations.join("\n")) : null, block("answer", it.answer)))];
      const right = [h("h3", null, "Executor selections (Eq. 6)"), d.subs.map((s) => h("div", { class: "selection " + s.status },
        kv([["sub-question q_i", s.question], ["sub-answer a_i", s.answer], ["status", s.status + (s.reason ? ": " + s.reason : "")]]),
        s.sel ? [kv([["F̂_i positions", s.sel.gold.join(", ")], ["cosine", s.sel.sims.join(", ")], ["argmax fallback", s.sel.fallback],
          ["executor <select>", s.sel.select ? s.sel.select.join(", ") : "–", s.sel.select && s.sel.gold.every((g) => s.sel.select.includes(g)) ? "right" : "wrong"],
          ["selection", s.sel.status + (s.sel.reason ? ": " + s.sel.reason : "")]]),
        block("executor thought", s.sel.thought),
        h("ol", { class: "evidence", start: 0 }, s.sel.evidence.map((e, k) => h("li", {
          class: (s.sel.gold.includes(k) ? "gold " : "") + (s.sel.select && s.sel.select.includes(k) ? "selected" : "") },
          s.sel.gold.includes(k) ? badge("F̂_i", "gold") : null, s.sel.select && s.sel.select.includes(k) ? badge("selected", "path") : null, " ", e)))]
          : h("p", { class: "hint" }, "no selection (the path's final answer did not pass, or not run yet)")))];
      return [h("h2", null, d.question), kv([["answer", d.answer], ["aliases", d.answers.join(" | ")], ["hops", d.hops],
        ["gates", d.gate ? (d.gate.passed ? "passed" : "failed: " + d.gate.reasons.join("; ")) : "not gated yet", d.gate && d.gate.passed ? "right" : "wrong"],
        ["final answer", d.gate ? d.gate.prediction : undefined], ["F1", d.gate ? d.gate.f1 : undefined]]),
      d.gate ? h("div", { class: "checks" }, Object.entries(d.gate.checks).map(([k, v]) => [badge(k, v ? "pass" : "fail"), " "])) : null,
      h("div", { class: "side-by-side" }, h("div", null, left), h("div", null, right)),
      h("details", null, h("summary", null, "supporting facts F (" + d.facts.length + ", F̂ marked)"),
        h("ol", { class: "evidence", start: 0 }, d.facts.map(([t, x], k) => h("li", { class: d.gold.includes(k) ? "gold" : "" }, h("b", null, t), ": ", x))))];
    },
    reasonrag(d) {
      const pairsAt = {};
      for (const p of d.pairs) (pairsAt[p.parent] = pairsAt[p.parent] || []).push(p);
      const head = (n) => [badge(n.id, "id"), " ", badge(n.action, "action"), " ", badge(n.stage, "stage"), " ",
        h("span", { class: "qn" }, "Q=" + n.q.toFixed(3) + " N=" + n.n), n.pruned ? [" ", badge("pruned", "skip")] : null,
        n.flag ? [" ", badge(n.flag, "fail")] : null,
        n.answer ? [" ", badge("answer: " + n.answer, n.correct ? "pass" : "fail")] : null,
        pairsAt[n.id] ? [" ", badge("fork: " + pairsAt[n.id].length + " pairs", "path")] : null];
      const body = (n) => h("div", { class: "node-body" + (n.pruned ? " pruned" : "") }, block("response", n.response),
        n.query ? block("query", n.query) : null, n.docs ? block("documents", n.docs) : null,
        pairsAt[n.id] ? h("table", { class: "pairs" }, h("tr", null, ["chosen", "rejected", "type", "Q chosen", "Q rejected", "ΔQ"].map((x) => h("th", null, x))),
          pairsAt[n.id].map((p) => h("tr", { class: "pair" }, h("td", null, p.chosen), h("td", null, p.rejected), h("td", null, p.type),
            h("td", null, fmt(p.chosen_q)), h("td", null, fmt(p.rejected_q)), h("td", { class: "gap" }, fmt(p.gap))))) : null);
      return [h("h2", null, d.question), kv([["gold answers", d.golds.join(" | ")], ["search", d.status], ["iterations", d.iterations],
        ["pairs", d.pairs.length], ["greedy baseline", d.greedy ? fmt(d.greedy.answer) + " (F1 " + fmt(d.greedy.f1) + ", " + d.greedy.finish + ")" : undefined]]),
      h("h3", null, "Search tree (node Q at α = " + fmt(d.alpha) + "; pairs at each fork with ΔQ at α = " + fmt(d.alpha_label) + ")"), treeOf(d.nodes, head, body)];
    },
    tracer(d) {
      const checks = (cs) => h("table", { class: "checks" }, h("tr", null, ["stage", "verdict", "reason", "answer", "EM", "F1", "judge"].map((x) => h("th", null, x))),
        cs.map((c) => h("tr", { class: "check " + (c.passed === true ? "pass" : c.passed === false ? "fail" : "skip") },
          h("td", null, c.name), h("td", null, verdict(c.passed)), h("td", null, c.reason), h("td", null, fmt(c.answer)),
          h("td", null, fmt(c.em)), h("td", null, fmt(c.f1)), h("td", null, fmt(c.judge)))));
      const hop = (x) => h("li", { class: "hop" + (x.verified ? " verified" : " failed") },
        h("div", { class: "step-head" }, h("b", null, "hop " + x.level), " ", badge(x.template, "action"), " ", verdict(x.verified), x.reason ? " " + x.reason : null),
        kv([["question", x.question], ["answer", x.answer + (x.aliases.length ? " (aliases: " + x.aliases.join(" | ") + ")" : "")],
          ["atomic question", x.atomic_q], ["atomic answer", x.atomic_a], ["document", x.doc_title + " [" + x.doc_id + "]"]]),
        block("document text", x.doc_text), checks(x.checks));
      return [h("h2", null, d.hops.length ? d.hops[d.hops.length - 1].question : "(no chain)"),
        d.doc ? [kv([["seed document", d.doc.title], ["entity type", d.doc.type], ["domain", d.doc.domain]]),
          block("seed document text", d.doc.text, "seed-doc")] : null,
        d.atomic ? [h("h3", null, "Atomic pair " + d.atomic.status), kv([["question", d.atomic.question], ["answer", d.atomic.answer], ["reason", d.atomic.reason]]), checks(d.atomic.checks || [])] : null,
        d.hops.length ? [h("h3", null, "Chain, hop by hop"), h("ol", { class: "chain" }, d.hops.map(hop))] : null,
        d.failed ? [h("h3", null, "Hop " + d.failed.level + " failed: " + d.failed.reason), h("ol", { class: "chain attempts" }, d.failed.attempts.map(hop))] : null];
    },
  };
  function legend() {
    return h("div", { class: "legend" }, "distractor types: ", ["doppelganger", "false_shortcut", "fragmented_puzzle", "subjective_fallacy"].map((t) =>
      [badge(t, "dtype", { "data-dtype": t }), " "]), badge("on a selected path", "path"));
  }

  // ---- resizable list pane: drag the divider (the width is kept for the next visit) ----------
  const divider = document.getElementById("divider"), split = divider.parentElement;
  const savedW = localStorage.getItem("agentrag-list-w");
  if (savedW) split.style.setProperty("--list-w", savedW);
  divider.addEventListener("pointerdown", (e) => {
    e.preventDefault();
    divider.setPointerCapture(e.pointerId);
    divider.classList.add("dragging");
    const left = split.getBoundingClientRect().left;
    const move = (ev) => split.style.setProperty("--list-w", Math.max(200, ev.clientX - left) + "px");
    const up = () => { divider.classList.remove("dragging"); divider.removeEventListener("pointermove", move);
      localStorage.setItem("agentrag-list-w", split.style.getPropertyValue("--list-w")); };
    divider.addEventListener("pointermove", move);
    divider.addEventListener("pointerup", up, { once: true });
  });

  // ---- tabs, start -------------------------------------------------------------------------
  function showTab(name) {
    document.querySelectorAll("section.tab").forEach((s) => { s.hidden = s.id !== "tab-" + name; });
    document.querySelectorAll("#tabs button").forEach((b) => b.classList.toggle("active", b.dataset.tab === name));
  }
  document.querySelectorAll("#tabs button").forEach((b) => b.addEventListener("click", () => showTab(b.dataset.tab)));
  showTab("items");
  renderFilters();
  renderHead();
  applyView();
  document.body.dataset.ready = "1";
  const m = /^#item=(.*)$/.exec(location.hash);
  if (m && KEY.id !== undefined) {
    const want = decodeURIComponent(m[1]);
    const i = META.rows.findIndex((r) => String(r[KEY.id]) === want);
    if (i >= 0) openDetail(i);
  }
})();
