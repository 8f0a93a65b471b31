"""The Tracer review sheet filled in in headless Chromium (Playwright): three scripted raters review
10 items with the browser only — read the full documents, choose Retain/Discard, comment, press
Save — and `agentrag synth tracer review --labels` reads the three downloads back (majority,
Fleiss' kappa, comments)."""

from __future__ import annotations

import csv
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tracer_support import run_world
from typer.testing import CliRunner

from agentrag.cli.main import app
from agentrag.records import read_jsonl
from agentrag.synth.tracer.export import export_benchmark
from agentrag.synth.tracer.review import fleiss_kappa, write_review_sheet
from agentrag.synth.tracer.schema import Chain
from extras_check import require_browser, require_module

pytestmark = pytest.mark.slow

require_module("playwright", "dev")
CHROMIUM = require_browser()
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
LONG_TAIL = "END-OF-THE-LONG-DOCUMENT"
XSS = "<script>window.__pwned = 1</script><img src=x onerror='window.__pwned = 2'>"

# 3 raters x 10 items: R = Retain, D = Discard
VOTES = {"ann": "RRRRRRRDDR", "bo": "RRRRRDRDDD", "cy": "RRRRRRDDRR"}
COMMENTS = {("ann", 7): 'bridge is wrong, "Wesleyan" means the band', ("bo", 5): "too easy,\nanswer is in hop 1",
            ("cy", 8): "fine after all"}


def _ten_items(run: Path) -> list[str]:
    """Ten benchmark items written by the real export: the scripted world's 4-hop chain, copied
    three times (3 items each) plus one 2-hop prefix; one document made long (4,000 characters)
    and one question carrying markup."""
    run_world(run)
    (chain,) = [c for c in read_jsonl(run / "chains.jsonl", Chain) if c.depth == 4]
    chains = []
    for i in range(3):
        c = chain.model_copy(deep=True, update={"id": f"{chain.id}-copy{i}"})
        chains.append(c)
    chains[0].hops[1].doc_text = ("Wesleyanism is a movement of Protestant Christians. " * 80) + LONG_TAIL
    chains[1].hops[3].question = chains[1].hops[3].question.replace("Romans?", f"Romans {XSS}?")
    chains.append(Chain(id=f"{chain.id}-short", doc_domain=chain.doc_domain, hops=chain.hops[:2]))
    for stale in run.glob("benchmark*.jsonl"):
        stale.unlink()
    assert export_benchmark(chains, run)["items"] == 10
    write_review_sheet(run)
    return [json.loads(x)["id"] for x in (run / "benchmark.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _review(browser: Any, sheet: Path, rater: str, out: Path) -> Path:
    """One rater's session: open the page, read, choose, comment, save (a download)."""
    ctx = browser.new_context(accept_downloads=True)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(sheet.as_uri())
    page.wait_for_selector("body[data-ready]")
    items = page.locator("section.item")
    assert items.count() == 10 and page.inner_text("#progress") == "0 of 10 decided"
    assert LONG_TAIL in items.nth(0).inner_text()  # the whole document, not its first 400 characters
    assert page.evaluate("window.__pwned") is None and XSS in page.inner_text("body")  # shown, not run
    page.fill("#rater", rater)
    for n, vote in enumerate(VOTES[rater]):
        sec = items.nth(n)
        assert sec.locator("tr.hop").count() >= 2 and sec.locator("li.check").count() > 0
        sec.locator(f"input.decision[value={'Retain' if vote == 'R' else 'Discard'}]").check()
        if (rater, n) in COMMENTS:
            sec.locator("textarea.comment").fill(COMMENTS[(rater, n)])
    assert page.inner_text("#progress") == "10 of 10 decided"
    with page.expect_download() as dl:
        page.click("#save")
    download = dl.value
    assert download.suggested_filename == f"labels-{rater}.csv"
    path = out / download.suggested_filename
    download.save_as(path)
    assert errors == []
    ctx.close()
    return path


def test_three_raters_fill_in_the_sheet_save_and_the_cli_reads_it_back(browser: Any, tmp_path: Path) -> None:
    run = tmp_path / "run"
    ids = _ten_items(run)
    files = [_review(browser, run / "review" / "sheet.html", rater, tmp_path) for rater in VOTES]
    rows = list(csv.DictReader(files[1].open(encoding="utf-8")))
    assert [r["id"] for r in rows] == ids and {r["rater"] for r in rows} == {"bo"}
    assert "".join("R" if r["decision"] == "Retain" else "D" for r in rows) == VOTES["bo"]
    assert rows[5]["comment"] == COMMENTS[("bo", 5)]

    r = CliRunner().invoke(app, ["synth", "tracer", "review", "--run", str(run),
                                 *[a for f in files for a in ("--labels", str(f))]])
    assert r.exit_code == 0, r.output
    dec = json.loads((run / "review" / "decisions.json").read_text())
    counts = [[sum(v[n] == "R" for v in VOTES.values()), sum(v[n] == "D" for v in VOTES.values())] for n in range(10)]
    assert dec["annotators"] == list(VOTES) and dec["items_rated_by_all"] == 10
    assert dec["fleiss_kappa"] == pytest.approx(fleiss_kappa(counts), abs=1e-4)
    majority = ["Retain" if c[0] >= 2 else "Discard" for c in counts]
    assert [dec["decisions"][i] for i in ids] == majority
    assert [d["id"] for d in dec["disagreements"]] == sorted(ids[n] for n in range(10) if 0 < counts[n][0] < 3)
    for (rater, n), text in COMMENTS.items():
        assert dec["per_item"][ids[n]]["comments"] == {rater: text}
    kept = [json.loads(x)["id"] for x in (run / "benchmark_reviewed.jsonl").read_text().splitlines()]
    assert kept == [i for i, m in zip(ids, majority, strict=True) if m == "Retain"]
    keep = os.environ.get("AGENTRAG_REVIEW_KEEP")  # for the closing note: the files and the result
    if keep:
        for f in [*files, run / "review" / "decisions.json"]:
            shutil.copy(f, Path(keep) / f.name)


def _leaving_warns(page: Any) -> bool:
    """Whether leaving the page now asks first (its ``beforeunload`` handler cancels the event)."""
    return bool(page.evaluate("() => { const e = new Event('beforeunload', {cancelable: true});"
                              " window.dispatchEvent(e); return e.defaultPrevented; }"))


def _choose(items: Any, n: int, vote: str) -> None:
    items.nth(n).locator(f"input.decision[value={'Retain' if vote == 'R' else 'Discard'}]").check()


def _checked(items: Any) -> str:
    out = ""
    for n in range(items.count()):
        sec = items.nth(n)
        out += "R" if sec.locator("input.decision[value=Retain]").is_checked() else \
            "D" if sec.locator("input.decision[value=Discard]").is_checked() else "-"
    return out


def _review_with_reloads(browser: Any, sheet: Path, rater: str, out: Path) -> Path:
    """One rater decides half the items, reloads (the page restores name, decisions, comments and
    says they are unsaved), decides the rest, reloads again, saves, and reloads once more."""
    ctx = browser.new_context(accept_downloads=True)  # one browser profile per rater
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(sheet.as_uri())
    page.wait_for_selector("body[data-ready]")
    items = page.locator("section.item")
    assert not _leaving_warns(page)  # nothing decided: nothing to lose
    page.fill("#rater", rater)
    votes = VOTES[rater]
    for n in range(5):
        _choose(items, n, votes[n])
    for (who, n), text in COMMENTS.items():
        if who == rater:
            items.nth(n).locator("textarea.comment").fill(text)
    assert _leaving_warns(page) and "unsaved" in page.inner_text("#unsaved")
    page.reload()
    page.wait_for_selector("body[data-ready]")
    assert page.input_value("#rater") == rater
    assert _checked(items) == votes[:5] + "-" * 5 and page.inner_text("#progress") == "5 of 10 decided"
    for (who, n), text in COMMENTS.items():
        if who == rater:
            assert items.nth(n).locator("textarea.comment").input_value() == text
    assert _leaving_warns(page)  # restored, still not saved to a file
    for n in range(5, 10):
        _choose(items, n, votes[n])
    page.reload()
    page.wait_for_selector("body[data-ready]")
    assert _checked(items) == votes and page.inner_text("#progress") == "10 of 10 decided"
    with page.expect_download() as dl:
        page.click("#save")
    path = out / dl.value.suggested_filename
    dl.value.save_as(path)
    assert not _leaving_warns(page) and page.inner_text("#unsaved") == ""
    page.reload()
    page.wait_for_selector("body[data-ready]")
    assert _checked(items) == votes and not _leaving_warns(page)  # saved work restored, nothing unsaved
    _choose(items, 0, "D" if votes[0] == "R" else "R")  # a change after saving is unsaved again
    assert _leaving_warns(page)
    _choose(items, 0, votes[0])
    assert not _leaving_warns(page)
    assert errors == []
    ctx.close()
    return path


def test_decisions_survive_reloads_leaving_unsaved_warns_and_kappa_is_computed(browser: Any, tmp_path: Path) -> None:
    run = tmp_path / "run"
    ids = _ten_items(run)
    sheet = run / "review" / "sheet.html"
    files = [_review_with_reloads(browser, sheet, rater, tmp_path) for rater in VOTES]
    for f, rater in zip(files, VOTES, strict=True):
        rows = list(csv.DictReader(f.open(encoding="utf-8")))
        assert [r["id"] for r in rows] == ids and {r["rater"] for r in rows} == {rater}
        assert "".join("R" if r["decision"] == "Retain" else "D" for r in rows) == VOTES[rater]
    r = CliRunner().invoke(app, ["synth", "tracer", "review", "--run", str(run),
                                 *[a for f in files for a in ("--labels", str(f))]])
    assert r.exit_code == 0, r.output
    dec = json.loads((run / "review" / "decisions.json").read_text())
    counts = [[sum(v[n] == "R" for v in VOTES.values()), sum(v[n] == "D" for v in VOTES.values())] for n in range(10)]
    assert dec["fleiss_kappa"] == pytest.approx(fleiss_kappa(counts), abs=1e-4)
    assert dec["fleiss_kappa"] == pytest.approx(0.3182, abs=1e-4)
    for (rater, n), text in COMMENTS.items():
        assert dec["per_item"][ids[n]]["comments"] == {rater: text}


def test_another_benchmark_does_not_see_these_decisions(browser: Any, tmp_path: Path) -> None:
    """The browser keeps decisions per benchmark: the same profile opening another benchmark's
    sheet starts empty, and the first sheet still has its own."""
    run_a, run_b = tmp_path / "a", tmp_path / "b"
    _ten_items(run_a)
    run_world(run_b)
    write_review_sheet(run_b)
    ctx = browser.new_context()
    page = ctx.new_page()
    page.goto((run_a / "review" / "sheet.html").as_uri())
    page.wait_for_selector("body[data-ready]")
    page.fill("#rater", "ann")
    _choose(page.locator("section.item"), 0, "R")
    page.goto((run_b / "review" / "sheet.html").as_uri())
    page.wait_for_selector("body[data-ready]")
    assert page.input_value("#rater") == "" and "-" in _checked(page.locator("section.item"))
    assert page.inner_text("#progress").startswith("0 of")
    page.goto((run_a / "review" / "sheet.html").as_uri())
    page.wait_for_selector("body[data-ready]")
    assert page.input_value("#rater") == "ann" and _checked(page.locator("section.item"))[0] == "R"
    ctx.close()
