"""Run viewer: page size and open time for a 1,000-item eval run, in headless Chromium.

A synthetic eval run is written with realistic sizes: 1,000 questions, 5 retrieval steps each
(thought, search call, 5 retrieved documents of 100 words), then the answer; every hit is a
distinct document (25,000 real-sentence passages from ``agentrag.testing.recombined_corpus`` over
the shared corpora), the worst case for the page's document table. ``agentrag view`` writes the
page; it is opened from disk (file://) in Debian's chromium through Playwright, fresh page each
time, and timed from navigation to the first table page rendered (``body[data-ready]``); then
the first record is opened (its details are unpacked on that first click). Baseline, same
browser and process: a plain static HTML table of the same 1,000 rows (no script). Targets: page
< 5 MB, open < 2 s.

    PYTHONPATH=src .venv/bin/python benchmarks/viewer.py [--items 1000] [--repeat 5] [--steps 5] [--docs 5]
"""

from __future__ import annotations

import argparse
import html
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _shared import DATA

from agentrag.eval.result import EvalResult
from agentrag.records import Hit, Step, ToolCall, Trajectory, Usage, write_jsonl
from agentrag.report.viewer import build_payload, write_viewer
from agentrag.testing import recombined_corpus

SOURCES = [DATA / "corpora" / "2wiki_passages_6119.jsonl", DATA / "corpora" / "musique_train_passages_1890.jsonl"]
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
STEPS, K = 5, 5


def synthetic_run(run_dir: Path, n: int, steps_n: int = STEPS, k: int = K) -> None:
    rng = random.Random(0)
    corpus = recombined_corpus(n * steps_n * k, [str(s) for s in SOURCES], words=100)
    results = []
    for i in range(n):
        question = f"Question {i}: which entity connects the facts of these passages, and when did it happen?"
        steps = []
        for s in range(steps_n):
            hits = []
            for r in range(k):
                p = next(corpus)
                title, text = p["contents"].split("\n", 1)
                hits.append(Hit(id=f"d{p['id']}", title=title.strip('"'), text=text, score=round(0.9 - 0.05 * r, 3)))
            thought = (f"Step {s + 1}: the previous documents mention {hits[0].title}; I should look up how it "
                       "relates to the question before answering, and check the dates.")
            steps.append(Step(thought=thought, action=ToolCall(name="dense_search", arguments={
                "query": f"{hits[0].title} relation question {i} step {s}", "top_k": k}),
                observation="\n".join(f"Doc {j + 1} (Title: {h.title}) {h.text}" for j, h in enumerate(hits)),
                hits=hits, usage=Usage(prompt_tokens=900 + 700 * s, completion_tokens=60, calls=1),
                latency=round(rng.uniform(0.5, 2.0), 3)))
        right = rng.random() < 0.5
        answer = f"answer {i}" if right else "something else"
        steps.append(Step(thought=f"The answer is {answer}. <answer>{answer}</answer>",
                          usage=Usage(prompt_tokens=4500, completion_tokens=20, calls=1), latency=0.8))
        traj = Trajectory(id=f"q{i}", question=question, steps=steps, answer=answer, agent="react", model="synthetic",
                          usage=Usage(prompt_tokens=12000, completion_tokens=320, calls=steps_n + 1), elapsed=7.5)
        results.append(EvalResult(id=f"q{i}", question=question, golden_answers=[f"answer {i}"], prediction=answer,
                                  hops=2 + i % 3, em=float(right), f1=float(right), acc=float(right), correct=right,
                                  steps=steps_n, topk_per_step=[k] * steps_n, trajectory=traj))
    write_jsonl(run_dir / "results.jsonl", results)


def baseline_table(run_dir: Path, out: Path) -> None:
    p = build_payload(run_dir)
    head = "".join(f"<th>{html.escape(c['label'])}</th>" for c in p.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>" for row in p.rows)
    out.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>baseline</title></head><body>"
                   f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></body></html>",
                   encoding="utf-8")


def open_times(browser: object, url: str, ready: str, repeat: int, click: bool = False) -> tuple[list[float], list[float]]:
    opened, clicked = [], []
    for _ in range(repeat):
        page = browser.new_page()  # type: ignore[attr-defined]
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))  # noqa: B023
        t0 = time.perf_counter()
        page.goto(url)
        page.wait_for_selector(ready)
        opened.append(time.perf_counter() - t0)
        if click:
            t1 = time.perf_counter()
            page.locator("#items tbody tr").first.click()
            page.wait_for_selector("#detail .record")
            clicked.append(time.perf_counter() - t1)
        if errors:
            sys.exit(f"page errors: {errors}")
        page.close()
    return opened, clicked


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--steps", type=int, default=STEPS, help="retrieval steps per item")
    ap.add_argument("--docs", type=int, default=K, help="documents per step")
    ap.add_argument("--chromium", default=os.environ.get("AGENTRAG_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium")
    args = ap.parse_args()
    if not os.path.exists(args.chromium):
        sys.exit("chromium not found: apt-get install -y chromium (or make browser), or pass --chromium PATH")
    missing = [str(s) for s in SOURCES if not s.exists()]
    if missing:
        sys.exit(f"shared corpora not found: {missing}; put ../shared beside the repository or set AGENTRAG_SHARED")
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "eval_run"
        run.mkdir()
        t0 = time.perf_counter()
        synthetic_run(run, args.items, args.steps, args.docs)
        jsonl_mb = (run / "results.jsonl").stat().st_size / 1e6
        t1 = time.perf_counter()
        page = write_viewer(run)
        write_s = time.perf_counter() - t1
        whole = write_viewer(run, Path(tmp) / "whole.html", doc_chars=0, text_chars=0)
        base = Path(tmp) / "baseline.html"
        baseline_table(run, base)
        print(f"items={args.items}  steps/item={args.steps}  docs/step={args.docs} (100 words, all distinct)  "
              f"results.jsonl={jsonl_mb:.1f} MB  (made in {t1 - t0:.1f}s)")
        note = re.search(r'<footer id="limits">(.*?)</footer>', page.read_text(encoding="utf-8"))
        print(f"page: {page.stat().st_size / 1e6:.2f} MB (target < 5)  written in {write_s:.1f}s  | "
              f"with --doc-chars 0 --text-chars 0: {whole.stat().st_size / 1e6:.2f} MB  | "
              f"baseline table: {base.stat().st_size / 1e6:.2f} MB")
        print(f"page footer: {html.unescape(note.group(1)) if note else '?'}")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, args=ARGS)
            open_times(browser, base.as_uri(), "table", 1)  # warm-up
            ours, click = open_times(browser, page.as_uri(), "body[data-ready]", args.repeat, click=True)
            theirs, _ = open_times(browser, base.as_uri(), "table tbody tr", args.repeat)
            browser.close()
        m_ours, m_base = statistics.median(ours), statistics.median(theirs)
        print(f"open (navigation -> first table page rendered), median of {args.repeat}: viewer {m_ours:.3f}s "
              f"(target < 2)  baseline {m_base:.3f}s  ratio={m_ours / m_base:.2f}")
        print(f"first record opened (details unpacked on first click): median {statistics.median(click):.3f}s")


if __name__ == "__main__":
    main()
