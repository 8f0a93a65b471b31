"""The run viewer without a browser: run-kind detection, payloads of fixture runs made by the real
pipelines, escaping of record text, text limits, the CLI and --serve."""

from __future__ import annotations

import base64
import gzip
import json
import random
import re
import threading
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner
from viewer_support import XSS, eval_run, ragshaper_run, reasonrag_run, tracer_run

from agentrag.cli.main import app
from agentrag.errors import UserError
from agentrag.report.viewer import build_payload, detect_run_kind, make_server, write_viewer
from agentrag.report.viewer.common import DOC_LIMITS, Payload
from agentrag.report.viewer.page import fit_documents


def _page_data(html: str) -> tuple[dict, dict]:
    meta = json.loads(re.search(r'<script type="application/json" id="viewer-data">(.*?)</script>', html, re.S).group(1))
    blob = re.search(r'<script type="application/octet-stream" id="viewer-details">(.*?)</script>', html, re.S).group(1)
    return meta, json.loads(gzip.decompress(base64.b64decode(blob)))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("runs")
    return {"eval": eval_run(base / "eval"), "ragshaper": ragshaper_run(base / "ragshaper"),
            "reasonrag": reasonrag_run(base / "reasonrag"), "tracer": tracer_run(base / "tracer")}


def test_detects_each_kind(runs: dict[str, Path]) -> None:
    for kind, path in runs.items():
        assert detect_run_kind(path) == kind


def test_unknown_or_missing_directory_names_the_files_looked_for(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="results.jsonl") as exc:
        detect_run_kind(tmp_path)
    assert str(tmp_path) in str(exc.value) and "trees.jsonl" in str(exc.value)
    with pytest.raises(UserError, match="does not exist"):
        detect_run_kind(tmp_path / "nope")
    res = CliRunner().invoke(app, ["view", str(tmp_path)])
    assert res.exit_code == 2 and "results.jsonl" in res.output


def test_a_bad_record_names_its_file_line_and_field(runs: dict[str, Path], tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    lines = (runs["eval"] / "results.jsonl").read_text().splitlines()
    (bad / "results.jsonl").write_text(lines[0] + "\n" + lines[1].replace('"steps":', '"steps":"many","x":') + "\n")
    with pytest.raises(UserError, match=r"results.jsonl:2: EvalResult field"):
        build_payload(bad)


def test_eval_payload_rows_details_and_gold_marks(runs: dict[str, Path]) -> None:
    p = build_payload(runs["eval"])
    keys = [c["key"] for c in p.columns]
    rows = [dict(zip(keys, r, strict=True)) for r in p.rows]
    assert [r["id"] for r in rows] == [f"q{i}" for i in range(6)]
    assert [r["ok"] for r in rows] == [i % 2 == 0 for i in range(6)] and [r["hops"] for r in rows] == [1, 2, 3] * 2
    d0 = p.details[0]
    assert d0["gold_ids"] == ["p0"] and len(d0["steps"]) == 2 and d0["steps"][0]["tool"] == "dense_search"
    docs = p.docs.rows
    marks = {docs[i][0]: mark for i, _score, mark in d0["steps"][0]["hits"]}
    assert marks["p0"] == 1 and all(m == 0 for k, m in marks.items() if k != "p0")
    assert {c["title"] for c in p.charts} == {"Accuracy by hop count", "Retrieval steps: correct vs incorrect",
                                              "Mean top-k per retrieval step"}
    assert any(t["title"] == "Metrics" for t in p.summary)


def test_record_text_is_escaped_in_the_page(runs: dict[str, Path], tmp_path: Path) -> None:
    html = write_viewer(runs["eval"], tmp_path / "v.html").read_text()
    assert "<script>window.__pwned" not in html and "<img src=x" not in html
    assert html.count("</script>") == html.count("<script")  # no record text closes an element
    meta, bulk = _page_data(html)
    assert any(XSS in (d[2] or "") for d in bulk["docs"])  # kept verbatim as data, shown as text
    assert "script-src 'sha256-" in html and "default-src 'none'" in html
    assert len(meta["rows"]) == 6 and meta["kind"] == "eval"


def test_text_limits(runs: dict[str, Path], tmp_path: Path) -> None:
    _meta, bulk = _page_data(write_viewer(runs["eval"], tmp_path / "cut.html", doc_chars=10).read_text())
    assert all(len(d[2]) <= 10 + len("… [+999 chars]") for d in bulk["docs"]) and any("… [+" in d[2] for d in bulk["docs"])
    html = write_viewer(runs["eval"], tmp_path / "whole.html").read_text()
    assert not any("… [+" in d[2] for d in _page_data(html)[1]["docs"]) and "Documents are shown whole" in html
    p = build_payload(runs["eval"], text_chars=5)
    assert p.details[0]["steps"][-1]["th"].endswith("chars]")
    with pytest.raises(UserError, match="doc_chars"):
        write_viewer(runs["eval"], doc_chars=-1)


def test_documents_are_cut_to_fit_the_size_budget() -> None:
    p = Payload(kind="eval", title="t", columns=[])
    rng = random.Random(0)
    for i in range(300):
        p.docs.add(f"d{i}", "T", " ".join(f"w{rng.randrange(10**6)}" for _ in range(150)))
    assert fit_documents(p, None, max_mb=50)[1:] == (None, True)  # fits whole
    blob, cut, fits = fit_documents(p, None, max_mb=0.2)
    assert cut in DOC_LIMITS and fits and len(blob) <= 100_000
    bigger, longer, _ = fit_documents(p, None, max_mb=0.25)
    assert longer > cut and len(bigger) > len(blob)  # the longest cut that fits is taken
    assert fit_documents(p, 0, max_mb=0.2)[1:] == (None, False)  # 0: whole, whatever the size
    assert fit_documents(p, None, max_mb=0.11)[1:] == (DOC_LIMITS[-1], False)  # the shortest cut, still over


def test_synth_payloads(runs: dict[str, Path]) -> None:
    rs = build_payload(runs["ragshaper"])
    assert len(rs.rows) == 2 and any(t["title"] == "Funnel" for t in rs.summary)
    nodes = rs.details[0]["nodes"]
    assert any(n["dtype"] for n in nodes) and any(n["paths"] for n in nodes)
    # a QA the gates rejected has no trajectory; the typed documents are in one that was elicited
    traj = next(q["traj"] for d in rs.details for q in d["qa"] if q["traj"])
    assert any(rs.docs.rows[h[0]][4] for s in traj["steps"] for h in s["hits"])  # K~ documents typed
    rr = build_payload(runs["reasonrag"])
    d = rr.details[0]
    assert d["pairs"] and {"q", "n", "stage"} <= set(d["nodes"][0]) and d["pairs"][0]["gap"] > 0
    tr = build_payload(runs["tracer"])
    chain = next(x for x in tr.details if x["hops"])
    assert len(chain["hops"]) == 4 and all(h["checks"] for h in chain["hops"])
    assert any(not r[-1] for r in tr.rows)  # the rejected atomic pair is a failure row


def test_cli_writes_the_page(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "page.html"
    res = CliRunner().invoke(app, ["view", str(runs["tracer"]), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert out.exists() and "wrote" in res.output
    assert write_viewer(runs["reasonrag"]) == runs["reasonrag"] / "viewer.html"


def test_serve_answers_the_page_and_whole_records(runs: dict[str, Path]) -> None:
    server = make_server(runs["eval"], 0)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        page = urllib.request.urlopen(server.url, timeout=10).read().decode()
        assert 'id="viewer-details"' not in page and '"detail_url":"detail/"' in page
        rec = json.loads(urllib.request.urlopen(server.url + "detail/1", timeout=10).read())
        assert rec["d"]["question"] == "Which answer has town 1?"
        assert any(XSS in d[2] for d in rec["docs"])  # whole documents, only the record's own
        idx = {i for s in rec["d"]["steps"] for i, *_ in s["hits"]}
        assert idx == set(range(len(rec["docs"])))
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(server.url + "detail/99", timeout=10)
    finally:
        server.shutdown()
        server.server_close()
