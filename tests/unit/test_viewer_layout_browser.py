"""The viewer at 1,400 and 1,920 px (headless Chromium): the page fits the window, the key columns
are in view in the list pane, a cell cut by its width shows its whole text as a tooltip, the filter
controls fit the pane, a column can be hidden and shown, and an empty table says "none".
Screenshots at both widths go to tmp_path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_viewer_browser import ARGS, CHROMIUM  # noqa: F401  (the same Chromium, or the same skip)
from viewer_support import eval_run, evipath_run

from agentrag.report.viewer import write_viewer

pytestmark = pytest.mark.slow

KEYS = {"eval": ["question", "prediction", "gold", "em", "f1", "ok", "steps", "finish"],
        "evipath": ["question", "answer", "prediction", "f1", "gate", "ok"]}


@pytest.fixture(scope="module")
def browser() -> Any:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _run(kind: str, tmp: Path, data_dir: Path) -> Path:
    return eval_run(tmp / "eval", n=40) if kind == "eval" else \
        evipath_run(tmp / "evipath", data_dir / "musique" / "train_100.jsonl")


@pytest.mark.parametrize("width,height", [(1400, 900), (1920, 1080)])
@pytest.mark.parametrize("kind", ["eval", "evipath"])
def test_the_viewer_fits_the_window_with_its_key_columns_in_view(browser, tmp_path, data_dir, kind, width, height):
    page = browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(write_viewer(_run(kind, tmp_path, data_dir)).as_uri())
    page.wait_for_selector("body[data-ready]")
    page.locator("#items tbody tr").first.click()
    page.wait_for_selector("#detail .record")
    page.screenshot(path=str(tmp_path / f"{kind}-{width}.png"))
    sw, sh, iw, ih = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.scrollHeight,"
                                   " innerWidth, innerHeight]")
    assert sw <= iw and sh <= ih, f"page {sw}x{sh} in a {iw}x{ih} window"
    pane = page.locator("#list").bounding_box()
    right = pane["x"] + pane["width"] + 1
    for key in KEYS[kind]:
        box = page.locator(f'#items th[data-key="{key}"]').bounding_box()
        assert box is not None and box["x"] + box["width"] <= right and box["width"] >= 30, (key, box, pane)
    cut = page.evaluate("() => [...document.querySelectorAll('#items td')].filter(td => td.scrollWidth > td.clientWidth)"
                        ".map(td => [td.title, td.textContent])")
    assert all(title == text for title, text in cut), cut[:3]
    for control in page.locator("#filters > *").all():
        box = control.bounding_box()
        assert box["x"] + box["width"] <= right and box["width"] <= 260, box
    page.fill("#filter-text", "no row has this text 1a2b3c")
    assert page.inner_text("#items tbody").strip() == "none (no row matches the filters)"
    assert errors == []
    page.close()


def test_a_column_can_be_hidden_and_shown_and_the_choice_is_kept(browser, tmp_path, data_dir):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(write_viewer(_run("eval", tmp_path, data_dir)).as_uri())
    page.wait_for_selector("body[data-ready]")
    page.click("#columns summary")
    page.uncheck('#columns input[data-col="gold"]')
    assert page.locator('#items th[data-key="gold"]').count() == 0
    page.reload()
    page.wait_for_selector("body[data-ready]")
    assert page.locator('#items th[data-key="gold"]').count() == 0  # kept for the next visit
    page.click("#columns summary")
    page.check('#columns input[data-col="gold"]')
    assert page.locator('#items th[data-key="gold"]').count() == 1
    page.close()


def test_an_empty_summary_table_says_none(browser, tmp_path):
    from agentrag.report.viewer.common import Payload
    from agentrag.report.viewer.page import _summary_html

    p = Payload(kind="eval", title="t", columns=[], rows=[], filters=[])
    p.summary.append({"title": "Unfinished items", "headers": ["item", "reason"], "rows": []})
    assert '<td class="none" colspan="2">none</td>' in _summary_html(p)
