"""``run_suite`` and ``agentrag eval --suite``: agents x datasets into one run directory, the papers'
table (EM/F1 per dataset, then the average) with paired bootstrap intervals against the reference
row, resume, input checks, and the viewer page of a suite."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from agentrag.agents.standard_rag import RAG_SYSTEM
from agentrag.errors import UserError
from agentrag.eval.compare import bootstrap_diff
from agentrag.eval.suite import SuiteConfig, cell_dir, load_suite, run_suite, stratified_bootstrap
from agentrag.records import Message, Passage
from agentrag.testing import FakeRetriever, ScriptedLLM

PASSAGES = [Passage(id=f"p{i}", title=f"City {i}", text=f"City {i} is the capital of country {i}.") for i in range(6)]


def write_dataset(tmp_path, name: str, ids: range) -> str:
    path = tmp_path / name / "dev.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps({"id": f"{name}{i}", "question": f"What is the capital of country {i}?",
                                        "golden_answers": [f"City {i}"]}) + "\n" for i in ids))
    return str(path)


def reader(messages: list[Message], **_: Any) -> str:
    """Reads the answer off the documents when it is shown some (wrong on country 5), else guesses."""
    if messages[0].content != RAG_SYSTEM:
        return "City 0"
    asked = re.search(r"country (\d)\?", messages[1].content or "")
    n = asked.group(1) if asked else "?"
    return f"City {n}." if n != "5" else "Paris"


def suite(tmp_path, **extra: Any) -> SuiteConfig:
    return SuiteConfig(kb="kbdir", agents=["naive", "standard_rag", {"name": "irg2", "agent": "iter_retgen",
                                                                    "agent_config": {"iterations": 2}}],
                       datasets=[write_dataset(tmp_path, "alpha", range(4)), write_dataset(tmp_path, "beta", range(2, 6))],
                       reference="standard_rag", resamples=200, **extra)


def test_run_suite_writes_every_cell_and_the_papers_table(tmp_path):
    out, llm = tmp_path / "suite", ScriptedLLM(default=reader)
    table = run_suite(suite(tmp_path), out, llm=llm, retriever=FakeRetriever(PASSAGES))
    assert table["rows"] == ["naive", "standard_rag", "irg2"] and table["datasets"] == ["alpha", "beta"]
    assert table["agents"]["irg2"] == "iter_retgen"
    for row in table["rows"]:
        for ds in table["datasets"]:
            assert (cell_dir(out, row, ds) / "results.jsonl").is_file()
    cells = table["cells"]
    # naive answers "City 0": right once in alpha (country 0), never in beta
    assert (cells["naive"]["alpha"]["em"], cells["naive"]["beta"]["em"]) == (0.25, 0.0)
    # the readers are right except on country 5 (beta)
    assert (cells["standard_rag"]["alpha"]["em"], cells["standard_rag"]["beta"]["em"]) == (1.0, 0.75)
    assert cells["irg2"]["beta"]["n"] == 4 and table["average"]["standard_rag"]["em"] == 0.875
    assert table["average"]["naive"]["em"] == 0.125 and table["unfinished"] == 0
    d = table["delta"]["naive"]
    assert set(table["delta"]) == {"naive", "irg2"}
    assert d["alpha"]["em"]["mean"] == -0.75 and d["alpha"]["n_paired"] == 4
    assert d["average"]["em"]["mean"] == -0.75 and d["average"]["em"]["ci95"][1] < 0 and d["average"]["em"]["excludes_0"]
    assert table["delta"]["irg2"]["beta"]["f1"] == {"mean": 0.0, "ci95": [0.0, 0.0], "excludes_0": False}
    md = (out / "suite.md").read_text()
    assert md.splitlines()[:5] == [
        "| Method | alpha EM | alpha F1 | beta EM | beta F1 | Avg EM | Avg F1 |",
        "|---|---|---|---|---|---|---|",
        "| naive | 25.0 | 62.5 | 0.0 | 50.0 | 12.5 | 56.2 |",  # "City 0" shares a token with the gold
        "| standard_rag | 100.0 | 100.0 | 75.0 | 75.0 | 87.5 | 87.5 |",
        "| irg2 | 100.0 | 100.0 | 75.0 | 75.0 | 87.5 | 87.5 |"]
    assert "| naive | -75.0 [" in md and "Difference from standard_rag" in md
    assert json.loads((out / "suite.json").read_text())["cells"] == cells
    assert "reference: standard_rag" in (out / "config.yaml").read_text()
    # every cell records its agent's settings (iterations 2: two generations per question)
    assert "iterations: 2" in (cell_dir(out, "irg2", "alpha") / "config.yaml").read_text()
    assert llm.calls == 2 * 4 * (1 + 1 + 2)


def test_run_suite_resumes_cells_and_reuses_finished_ones(tmp_path):
    out, cfg = tmp_path / "suite", suite(tmp_path, limit=2)
    run_suite(cfg, out, llm=ScriptedLLM(default=reader), retriever=FakeRetriever(PASSAGES))
    again = ScriptedLLM(default=reader)
    table = run_suite(cfg, out, llm=again, retriever=FakeRetriever(PASSAGES))
    assert again.calls == 0 and table["cells"]["naive"]["alpha"]["n"] == 2
    more = ScriptedLLM(default=reader)
    table = run_suite(cfg.model_copy(update={"limit": 3}), out, llm=more, retriever=FakeRetriever(PASSAGES))
    assert more.calls == 2 * (1 + 1 + 2) and table["cells"]["standard_rag"]["beta"]["n"] == 3
    # a smaller limit scores the first questions only, whatever the cells' files hold
    fewer = ScriptedLLM(default=reader)
    table = run_suite(cfg.model_copy(update={"limit": 1}), out, llm=fewer, retriever=FakeRetriever(PASSAGES))
    assert fewer.calls == 0 and {c["n"] for r in table["cells"].values() for c in r.values()} == {1}


def test_the_average_interval_resamples_each_dataset_apart():
    a = ([0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0])
    b = ([1.0, 0.0], [1.0, 0.0])
    mean, lo, hi = stratified_bootstrap([a, b], resamples=500)
    assert (mean, lo, hi) == (0.5, 0.5, 0.5)  # no spread within either dataset: none in the average
    assert stratified_bootstrap([a], resamples=300) == bootstrap_diff(*a, resamples=300)[:1] + (1.0, 1.0)
    with pytest.raises(ValueError):
        stratified_bootstrap([a, ([], [])])


def test_suite_files_fail_with_named_keys(tmp_path):
    data = write_dataset(tmp_path, "alpha", range(2))
    bad = tmp_path / "s.yaml"
    bad.write_text(f"kb: k\nagents: [naive]\ndatasets: [{data}]\nrefrence: naive\n")
    with pytest.raises(UserError, match="unknown key 'refrence'; did you mean 'reference'"):
        load_suite(bad)
    bad.write_text(f"kb: k\nagents: [naive, standard_rag]\ndatasets: [{data}]\nreference: ircot\n")
    with pytest.raises(UserError, match="reference 'ircot' is not a row"):
        load_suite(bad)
    bad.write_text(f"kb: k\nagents: [naive, naive]\ndatasets: [{data}]\n")
    with pytest.raises(UserError, match="'naive' is used twice"):
        load_suite(bad)
    cfg = load_suite(tmp_path / "s.yaml", ["agents=[naive]", "limit=1"])
    assert cfg.reference == "naive" and cfg.datasets[0].name == "alpha" and cfg.limit == 1
    out = tmp_path / "out"
    with pytest.raises(UserError, match="unknown agent 'nope'"):
        run_suite(SuiteConfig(kb="k", agents=["nope"], datasets=[data]), out, llm=ScriptedLLM(),
                  retriever=FakeRetriever(PASSAGES))
    with pytest.raises(UserError, match="missing.jsonl"):
        run_suite(SuiteConfig(kb="k", agents=["naive"], datasets=[str(tmp_path / "missing.jsonl")]), out,
                  llm=ScriptedLLM(), retriever=FakeRetriever(PASSAGES))
    assert not out.exists()


def test_the_viewer_shows_a_suite(tmp_path):
    from agentrag.report.viewer import build_payload, detect_run_kind

    out, cfg = tmp_path / "suite", suite(tmp_path, limit=2)
    run_suite(cfg, out, llm=ScriptedLLM(default=reader), retriever=FakeRetriever(PASSAGES))
    assert detect_run_kind(out) == "suite"
    p = build_payload(out)
    assert len(p.rows) == 3 * 2 * 2 and p.summary[0]["title"].startswith("Results")
    assert p.summary[0]["rows"][1][:3] == ["standard_rag", "100.0", "100.0"]
    keys = [c["key"] for c in p.columns]
    first = dict(zip(keys, p.rows[0], strict=True))
    assert (first["method"], first["dataset"]) == ("naive", "alpha") and p.details[0]["steps"]
    assert any(label == "model" for label, _ in p.header)
    run_suite(cfg.model_copy(update={"limit": 1}), out, llm=ScriptedLLM(default=reader),
              retriever=FakeRetriever(PASSAGES))
    assert len(build_payload(out).rows) == 3 * 2 * 1  # the questions the suite asks for now


def test_cli_eval_suite(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import agentrag.kb
    import agentrag.llm
    from agentrag.cli.main import app

    monkeypatch.setattr(agentrag.llm, "resolve_llm", lambda ref="embedded", *, cache=None, **kw:
                        ScriptedLLM(default=reader))
    monkeypatch.setattr("agentrag.llm.resolve.check_llm_ref", lambda ref, **kw: None)
    monkeypatch.setattr(agentrag.kb, "resolve_retriever", lambda ref: FakeRetriever(PASSAGES), raising=False)
    data = write_dataset(tmp_path, "alpha", range(3))
    spec = tmp_path / "suite.yaml"
    spec.write_text(f"kb: kbdir\nllm: openai:m\nagents: [naive, standard_rag]\ndatasets: [{data}]\n"
                    "reference: standard_rag\nresamples: 100\n")
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["eval", "--suite", str(spec), "--out", str(out), "--limit", "2"])
    assert res.exit_code == 0, res.output
    assert "| naive | 50.0 | 75.0 | 50.0 | 75.0 |" in res.output and "[" in res.output
    assert (out / "suite.md").read_text().splitlines()[2] == "| naive | 50.0 | 75.0 | 50.0 | 75.0 |"
    assert "limit: 2" in (out / "config.yaml").read_text()
    res = CliRunner().invoke(app, ["eval", "--suite", str(spec), "--out", str(out), "--agent", "react"])
    assert res.exit_code == 2 and "--agent cannot be combined" in res.output
