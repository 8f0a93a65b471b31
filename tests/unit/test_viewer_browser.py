"""The run viewer in headless Chromium (Debian's chromium driven by Playwright): each kind of run
renders its elements, filters hide the right rows, a click opens the record, record text is never
executed, no console errors; screenshots of the eval view and the tree views go to tmp_path."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from viewer_support import XSS, eval_run, evipath_run, ragshaper_run, reasonrag_run, tracer_run

from agentrag.report.viewer import make_server, write_viewer
from extras_check import require_browser, require_module

pytestmark = pytest.mark.slow

require_module("playwright", "dev")
CHROMIUM = require_browser()
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


class Page:
    """A page that records console errors and uncaught exceptions."""

    def __init__(self, browser: Any, url: str) -> None:
        self.errors: list[str] = []
        self.page = browser.new_page(viewport={"width": 1500, "height": 1000})
        self.page.on("console", lambda m: self.errors.append(f"console.{m.type}: {m.text}")
                     if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.goto(url)
        self.page.wait_for_selector("body[data-ready]")

    def rows(self) -> Any:
        return self.page.locator("#items tbody tr")

    def open_row(self, n: int = 0) -> Any:
        self.rows().nth(n).click()
        self.page.wait_for_selector("#detail .record")
        return self.page.locator("#detail .record")

    def close(self) -> None:
        assert self.errors == []
        self.page.close()


def _open(browser: Any, run_dir: Path) -> Page:
    return Page(browser, write_viewer(run_dir).as_uri())


def test_eval_view_filters_sorts_pages_and_opens_trajectories(browser: Any, tmp_path: Path) -> None:
    p = _open(browser, eval_run(tmp_path / "eval", n=120))
    pg = p.page
    assert p.rows().count() == 100 and "120 of 120 rows" in pg.inner_text("#count")
    pg.click("#next")
    assert p.rows().count() == 20
    pg.check("#filter-ok")  # wrong only: the odd-numbered questions
    assert "60 of 120 rows" in pg.inner_text("#count") and p.rows().count() == 60
    assert pg.locator("#items tbody tr.ok").count() == 0
    pg.select_option("#filter-hops", "2")
    ids = pg.locator("#items tbody tr td:first-child").all_inner_texts()
    assert ids and all(int(i[1:]) % 2 == 1 and 1 + int(i[1:]) % 3 == 2 for i in ids)
    pg.uncheck("#filter-ok")
    pg.select_option("#filter-hops", "")
    pg.fill("#filter-text", "town 1?")
    assert pg.locator("#items tbody tr td:first-child").all_inner_texts() == ["q1"]
    rec = p.open_row(0)  # q1: wrong answer, 2 steps, met the document with script-like text
    assert rec.locator("li.step").count() == 3 and "wrong" in rec.inner_text()
    assert XSS in rec.inner_text() and pg.evaluate("window.__pwned") is None
    assert pg.locator("img[src=x]").count() == 0
    pg.fill("#filter-text", "")
    pg.click("th[data-key=f1]")
    pg.click("th[data-key=f1]")  # descending: the right answers first
    assert pg.locator("#items tbody tr").first.get_attribute("class").startswith("ok")
    rec = p.open_row(0)
    assert rec.locator(".doc.gold").count() >= 1 and "gold passage" in rec.inner_text()
    assert rec.locator(".badge.usage").count() >= 1 and rec.locator(".badge.latency").count() >= 1
    pg.screenshot(path=str(tmp_path / "eval_view.png"), full_page=True)
    pg.click("#tabs button[data-tab=charts]")
    assert pg.locator("#tab-charts figure.chart svg").count() == 3
    pg.click("#tabs button[data-tab=summary]")
    assert "Hop-aware diagnosis" in pg.inner_text("#tab-summary")
    p.close()
    assert (tmp_path / "eval_view.png").stat().st_size > 10_000
    linked = Page(browser, (tmp_path / "eval" / "viewer.html").as_uri() + "#item=q3")  # a link opens its record
    linked.page.wait_for_selector("#detail .record")
    assert "Which answer has town 3?" in linked.page.inner_text("#detail h2")
    linked.close()


def test_ragshaper_tree_with_distractors_paths_and_funnel(browser: Any, tmp_path: Path) -> None:
    p = _open(browser, ragshaper_run(tmp_path / "rs"))
    assert p.rows().count() == 2
    rec = p.open_row(0)
    assert rec.locator("li.node").count() >= 5
    dtypes = rec.locator("li.node[data-dtype]")
    assert dtypes.count() >= 1 and dtypes.first.get_attribute("data-dtype") in (
        "doppelganger", "false_shortcut", "fragmented_puzzle", "subjective_fallacy")
    assert rec.locator("li.node.on-path").count() >= 2 and rec.locator(".badge.path").count() >= 2
    p.page.screenshot(path=str(tmp_path / "ragshaper_tree.png"), full_page=True)
    p.page.locator("#detail details.traj summary").first.click()
    assert rec.locator("details.traj .doc[data-dtype]").count() >= 1  # K~ documents the teacher met
    p.page.click("#tabs button[data-tab=summary]")
    summary = p.page.inner_text("#tab-summary")  # the driver's funnel: one row per declared stage
    assert "Funnel" in summary and "unfinished" in summary
    funnel = p.page.locator("#tab-summary table.summary").first.inner_text()
    assert [line.split("\t")[0] for line in funnel.splitlines()[1:]] == [
        "explore", "distractors", "paths", "qa", "elicit", "filter", "tag", "export"]
    assert "LLM usage" in summary  # and the rest of the run's report follows it
    p.close()


def test_reasonrag_tree_with_q_n_stage_and_pairs(browser: Any, tmp_path: Path) -> None:
    p = _open(browser, reasonrag_run(tmp_path / "rr"))
    rec = p.open_row(0)
    qn = rec.locator(".qn").all_inner_texts()
    assert len(qn) >= 5 and all(t.startswith("Q=") and " N=" in t for t in qn)
    assert rec.locator(".badge", has_text="grounding").count() >= 1
    assert re.search(r"node Q at α = [0-9.]+; pairs at each fork with ΔQ at α = [0-9.]+", rec.inner_text())
    pairs = rec.locator("tr.pair")
    assert pairs.count() >= 1 and float(pairs.first.locator("td.gap").inner_text()) > 0
    p.page.screenshot(path=str(tmp_path / "reasonrag_tree.png"), full_page=True)
    p.close()


def test_tracer_chain_hop_by_hop_and_failure_filter(browser: Any, tmp_path: Path) -> None:
    p = _open(browser, tracer_run(tmp_path / "tr"))
    assert p.rows().count() == 2
    p.page.check("#filter-ok")
    assert p.rows().count() == 1 and "atomic rejected" in p.rows().first.inner_text()
    p.page.uncheck("#filter-ok")
    p.page.select_option("#filter-depth", "4")
    rec = p.open_row(0)
    assert rec.locator("li.hop").count() == 4 and rec.locator("tr.check.pass").count() >= 8
    assert "solvability" in rec.inner_text()
    p.close()


def test_evipath_plans_iterations_and_selections(browser: Any, tmp_path: Path, data_dir: Path) -> None:
    p = _open(browser, evipath_run(tmp_path / "ep", data_dir / "musique" / "train_100.jsonl"))
    assert p.rows().count() == 3
    rec = p.open_row(0)
    assert rec.locator(".side-by-side ol.plan li").count() >= 2 and rec.locator(".iteration").count() >= 2
    assert rec.locator(".selection ol.evidence li.gold").count() >= 1
    assert "F̂_i positions" in rec.inner_text()
    p.close()


def test_served_page_fetches_records(browser: Any, tmp_path: Path) -> None:
    server = make_server(eval_run(tmp_path / "eval"), 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        p = Page(browser, server.url)
        rec = p.open_row(1)
        assert rec.locator("li.step").count() == 3 and XSS in rec.inner_text()
        assert p.page.evaluate("window.__pwned") is None
        p.close()
    finally:
        server.shutdown()
        server.server_close()
