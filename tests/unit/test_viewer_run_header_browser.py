"""The viewer parts of issue 28 in headless Chromium: the run header; the list pane resizable by
its divider with the key columns in view at 1,400 px; a failed record's raw model output and the
setting that would have helped; gold passages as text (from the run's KB); a step's reasoning,
collapsed; every synthesizer's statistics in its Summary; the Tracer seed document as text.
Screenshots go to tmp_path (and to $AGENTRAG_SHOTS when set)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_viewer_browser import ARGS, CHROMIUM, Page
from viewer_support import PASSAGES, eval_items, eval_run, reasonrag_run, tracer_run

from agentrag.agents import build_agent
from agentrag.eval.runner import EvalConfig, evaluate, summarize
from agentrag.kb.passages import PassageStore
from agentrag.report.viewer import write_viewer
from agentrag.runs import RunDir
from agentrag.testing import FakeRetriever, ScriptedLLM

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _shot(page: Any, tmp_path: Path, name: str) -> None:
    page.screenshot(path=str(tmp_path / name), full_page=False)
    if os.environ.get("AGENTRAG_SHOTS"):
        Path(os.environ["AGENTRAG_SHOTS"]).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(os.environ["AGENTRAG_SHOTS"]) / name), full_page=False)


def _open(browser: Any, run: Path, width: int = 1400) -> Page:
    p = Page(browser, write_viewer(run).as_uri())
    p.page.set_viewport_size({"width": width, "height": 900})
    return p


def _with_kb_and_reasoning(run: Path, tmp_path: Path) -> Path:
    """The eval run's config points at a KB directory holding the passages; q0's first step has
    reasoning text (a reasoning model's think text)."""
    kb = tmp_path / "kb"
    kb.mkdir()
    store = PassageStore(kb / "passages.sqlite", writable=True)
    store.append(PASSAGES)
    store.finish()
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    cfg["kb"] = str(kb)
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    rows[0]["trajectory"]["steps"][0]["reasoning"] = "First I should look up town 0. THINK-TEXT"
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_header_resizable_list_key_columns_gold_text_and_reasoning(browser: Any, tmp_path: Path) -> None:
    run = _with_kb_and_reasoning(eval_run(tmp_path / "eval", n=6), tmp_path)
    p = _open(browser, run)
    pg = p.page
    header = pg.inner_text("#run-header")
    assert "llm: scripted" in header and "dataset:" in header and "agent=react" in header
    assert "prompt +" in header and "calls" in header
    # key columns in view at 1,400 px: question, prediction, gold, EM, F1, correct
    right = pg.locator("#list").bounding_box()
    for key in ("question", "prediction", "gold", "em", "f1", "ok"):
        box = pg.locator(f"#items th[data-key={key}]").bounding_box()
        assert box["x"] + box["width"] <= right["x"] + right["width"] + 1, key
    # the divider resizes the list pane
    d = pg.locator("#divider").bounding_box()
    before = right["width"]
    pg.mouse.move(d["x"] + 3, d["y"] + 40)
    pg.mouse.down()
    pg.mouse.move(d["x"] + 203, d["y"] + 40, steps=5)
    pg.mouse.up()
    after = pg.locator("#list").bounding_box()["width"]
    assert 180 <= after - before <= 220, (before, after)
    rec = p.open_row(0)  # q0: right answer, gold passage p0 shown as text from the KB
    gold = rec.locator(".gold-docs .doc.gold")
    assert gold.count() == 1 and "Town 0 has the answer 0" in gold.inner_text()
    reasoning = rec.locator("details.reasoning")
    assert reasoning.count() == 1 and reasoning.get_attribute("open") is None  # collapsed
    assert not rec.locator("details.reasoning pre").is_visible()
    reasoning.locator("summary").click()
    assert "THINK-TEXT" in rec.locator("details.reasoning pre").inner_text()
    _shot(pg, tmp_path, "viewer_eval_header.png")
    p.close()


def test_a_failed_record_shows_raw_output_and_the_setting_that_helps(browser: Any, tmp_path: Path) -> None:
    out = tmp_path / "failed"
    items = [i.model_copy(update={"id": "5a7f6fd75542992e7d278cfa-" + i.id}) for i in eval_items(2)]  # HotpotQA-long
    run = RunDir(out)
    run.write_config(EvalConfig(dataset="", kb="fake", agent="react", llm="scripted"))
    chatty = ScriptedLLM(default=lambda messages, **_: "Well, I believe it is probably the town by the river.")
    results = evaluate(build_agent("react", chatty, FakeRetriever(PASSAGES)), items, run, concurrency=1)
    run.write_json("metrics.json", summarize(results))
    p = _open(browser, out)
    rec = p.open_row(0)
    text = rec.inner_text().lower()
    assert "raw model output" in text and "probably the town by the river" in text
    assert "what would have helped" in rec.locator(".help").inner_text() and "--llm" in text
    assert rec.locator(".block.raw pre").first.inner_text().startswith("Well, I believe")
    right = p.page.locator("#list").bounding_box()  # long ids do not push the key columns out of view
    for key in ("question", "prediction", "gold", "em", "f1", "ok"):
        box = p.page.locator(f"#items th[data-key={key}]").bounding_box()
        assert box["x"] + box["width"] <= right["x"] + right["width"] + 1, key
    _shot(p.page, tmp_path, "viewer_failed_record.png")
    p.close()


def test_synthesizer_statistics_are_in_the_summary(browser: Any, tmp_path: Path) -> None:
    p = _open(browser, reasonrag_run(tmp_path / "rr"))
    p.page.click("#tabs button[data-tab=summary]")
    summary = p.page.inner_text("#tab-summary")
    assert "LLM usage" in summary and summary.count("\n") > 20  # the report's statistics, not only α
    titles = p.page.locator("#tab-summary h3").all_inner_texts()
    assert len(titles) >= 4 and len(titles) == len(set(titles))
    _shot(p.page, tmp_path, "viewer_reasonrag_summary.png")
    p.close()


def test_tracer_seed_document_is_shown_as_text(browser: Any, tmp_path: Path) -> None:
    p = _open(browser, tracer_run(tmp_path / "tr"))
    rec = p.open_row(0)
    seed = rec.locator(".block.seed-doc pre")
    assert seed.count() == 1 and len(seed.inner_text()) > 20
    assert "model" in p.page.inner_text("#run-header")
    p.close()
