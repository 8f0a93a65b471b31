"""EviPath under the failure policy, through an OpenAI-compatible stub over HTTP (the gold-data
fake answers behind it): a 401 stops the run with nothing written as finished; an outage (500s, a
wrong-shaped 200) leaves the item unfinished (exit 3) and a rerun finishes it; a request over the
context window is a flagged record; a bug raises SynthBugs (exit 1); metrics.json has the
driver's typed shape with the LLM-usage block, shown by the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentrag.cli.main import app
from agentrag.errors import EndpointError
from agentrag.records import Message
from agentrag.synth.driver import SynthBugs
from agentrag.synth.evipath import EviPathRunConfig, run_evipath
from agentrag.testing import StubOpenAIServer
from evipath_fakes import CleanGoldLLM as GoldDecompositionLLM
from evipath_fakes import ContentWordEmbedder as HashEmbedder

pytestmark = pytest.mark.timeout(120)

N = 2


@pytest.fixture(scope="module")
def musique(data_dir: Path) -> Path:
    return data_dir / "musique" / "train_100.jsonl"


@pytest.fixture(scope="module")
def records(musique: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in musique.read_text().splitlines()[:N]]


@pytest.fixture(autouse=True)
def hash_phi(monkeypatch: pytest.MonkeyPatch) -> None:
    """φ of Eq. 6 from the hashing embedder (no model download) for CLI runs."""
    monkeypatch.setattr("agentrag.kb.embedders.load_embedder", lambda *a, **k: HashEmbedder())


def gold_stub(records: list[dict[str, Any]], faults: list[str]) -> StubOpenAIServer:
    gold = GoldDecompositionLLM(records)

    def reply(body: dict[str, Any]) -> str:
        msgs = [Message(role=m["role"], content=m.get("content") or "") for m in body["messages"]]
        return gold.chat(msgs)[0].text or ""

    return StubOpenAIServer(faults, reply=reply)


def llm_yaml(tmp_path: Path, url: str) -> str:
    path = tmp_path / "llm.yaml"
    path.write_text(f"backend: openai\nmodel: stub\nbase_url: {url}\napi_key: k\ntimeout: 5\nmax_retries: 1\n"
                    "backoff_initial: 0.01\nbackoff_max: 0.02\n")
    return str(path)


def cli(out: Path, musique: Path, llm: str) -> Any:
    return CliRunner().invoke(app, ["synth", "evipath", "--dataset", str(musique), "--limit", str(N), "--llm", llm,
                                    "--set", "concurrency=1", "--out", str(out)])


def lines(out: Path, stage: str) -> list[dict[str, Any]]:
    p = out / f"{stage}.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []


def cfg(musique: Path, llm: str) -> EviPathRunConfig:
    return EviPathRunConfig(datasets=[str(musique)], limit=N, concurrency=1, llm=llm)


def test_401_stops_the_run_with_nothing_finished_and_a_rerun_makes_calls(tmp_path: Path, records, musique):
    with gold_stub(records, ["401"]) as srv:
        llm = llm_yaml(tmp_path, srv.base_url)
        with pytest.raises(EndpointError):
            run_evipath(cfg(musique, llm), tmp_path / "api", embedder=HashEmbedder())
        for stage in ("plans", "iterations", "sub_answers", "selections", "gates", "conversations"):
            assert lines(tmp_path / "api", stage) == [], stage
        before = srv.requests
        m = run_evipath(cfg(musique, llm), tmp_path / "api", embedder=HashEmbedder())
        assert srv.requests > before and m["unfinished"] == 0
        assert len(lines(tmp_path / "api", "gates")) == N


def test_401_cli_exits_2_with_nothing_finished(tmp_path: Path, records, musique):
    with gold_stub(records, ["401"]) as srv:
        res = cli(tmp_path / "run", musique, llm_yaml(tmp_path, srv.base_url))
        assert res.exit_code == 2, res.output
        assert lines(tmp_path / "run", "plans") == [] and lines(tmp_path / "run", "gates") == []
        assert not (tmp_path / "run" / "metrics.json").exists()
        res = cli(tmp_path / "run", musique, llm_yaml(tmp_path, srv.base_url))
        assert res.exit_code == 0, res.output
        assert len(lines(tmp_path / "run", "gates")) == N


@pytest.mark.parametrize("fault", ["500", "content_null", "unknown_role"])
def test_outage_leaves_the_item_unfinished_exit_3_and_a_rerun_finishes(tmp_path: Path, records, musique, fault):
    out = tmp_path / "run"
    with gold_stub(records, [fault, fault]) as srv:  # the first plan request fails on both attempts
        res = cli(out, musique, llm_yaml(tmp_path, srv.base_url))
        assert res.exit_code == 3, res.output
        assert "unfinished" in res.output
        m = json.loads((out / "metrics.json").read_text())
        assert m["unfinished"] == 1 and m["unfinished_by_stage"] == {"paths": 1}
        funnel = {r["stage"]: r for r in m["funnel"]}
        assert funnel["paths"]["unfinished"] == 1 and funnel["gates"]["in"] == N - 1
        first = records[0]["id"]
        assert first in m["unfinished_items"]
        assert first not in {p["id"] for p in lines(out, "plans")}  # an outage is never a record
        assert first not in {g["id"] for g in lines(out, "gates")}
        calls = srv.requests
        res = cli(out, musique, llm_yaml(tmp_path, srv.base_url))
        assert res.exit_code == 0, res.output
        assert srv.requests > calls
        gates = lines(out, "gates")
        assert len(gates) == N and all(g["passed"] for g in gates)


def test_context_limit_is_a_flagged_record_not_unfinished(tmp_path: Path, records, musique):
    out = tmp_path / "run"
    with gold_stub(records, ["context"]) as srv:
        res = cli(out, musique, llm_yaml(tmp_path, srv.base_url))
        assert res.exit_code == 0, res.output
    plans = {p["id"]: p for p in lines(out, "plans")}
    first = plans[records[0]["id"]]
    assert first["status"] == "failed" and first["reason"].startswith("context_limit")
    m = json.loads((out / "metrics.json").read_text())
    funnel = {r["stage"]: r for r in m["funnel"]}
    assert m["unfinished"] == 0 and funnel["plans"]["rejected"] == {"context_limit": 1}
    gates = {g["id"]: g for g in lines(out, "gates")}
    assert len(gates) == N and not gates[records[0]["id"]]["passed"]


def test_a_bug_raises_synthbugs_after_the_metrics_and_exits_1(tmp_path: Path, records, musique,
                                                             monkeypatch: pytest.MonkeyPatch):
    import agentrag.synth.evipath.pipeline as pipeline

    real = pipeline.explore
    first = records[0]["id"]

    def buggy(planner, executor, item, plan, cfg):  # noqa: ANN001, ANN202
        if item.id == first:
            raise ZeroDivisionError("a bug")
        return real(planner, executor, item, plan, cfg)

    monkeypatch.setattr(pipeline, "explore", buggy)
    with gold_stub(records, []) as srv:
        llm = llm_yaml(tmp_path, srv.base_url)
        with pytest.raises(SynthBugs, match="ZeroDivisionError"):
            run_evipath(cfg(musique, llm), tmp_path / "api", embedder=HashEmbedder())
        m = json.loads((tmp_path / "api" / "metrics.json").read_text())
        assert m["bugs"] == 1 and m["unfinished"] == 1 and (tmp_path / "api" / "report.md").exists()
        assert first not in {g["id"] for g in lines(tmp_path / "api", "gates")}
        res = cli(tmp_path / "cli", musique, llm)
        assert res.exit_code == 1, res.output


def test_metrics_shape_and_llm_block_in_metrics_and_report(tmp_path: Path, records, musique):
    out = tmp_path / "run"
    with gold_stub(records, []) as srv:
        res = cli(out, musique, llm_yaml(tmp_path, srv.base_url))
        assert res.exit_code == 0, res.output
    m = json.loads((out / "metrics.json").read_text())
    assert m["synthesizer"] == "evipath" and m["name"] == "run" and m["unfinished"] == 0 and m["bugs"] == 0
    assert [r["stage"] for r in m["funnel"]] == ["items", "plans", "paths", "sub_answers", "selections", "gates",
                                                 "conversations", "export"]
    for row in m["funnel"]:
        assert set(row) == {"stage", "input", "output", "in", "out", "rejected", "unfinished", "unit"}
        assert row["input"] and row["output"] and row["unfinished"] == 0
    assert "llm_calls" not in m
    (role, stats), = m["llm"].items()
    assert role == "planner+executor" and stats
    assert m["mode"] == "abductive" and m["llm_per_item"]["calls"] > 3 and "wall_s" in m
    report = (out / "report.md").read_text()
    assert "LLM usage" in report and "planner+executor" in report
