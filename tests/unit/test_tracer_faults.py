"""Tracer builder under the one failure policy, through a fault-injecting OpenAI-compatible stub over
HTTP: a 401 stops the run with nothing finished written (exit 2); an outage (5xx, a wrong-shaped
200) leaves items unfinished (exit 3) and a rerun finishes them; a request over the context
window is a flagged record; a bug raises SynthBugs (exit 1). Plus the metrics' shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tracer_support import PASSAGES, run_config, run_world, stub_llm_yaml, stub_reply, world_llm
from typer.testing import CliRunner

from agentrag.cli.main import app
from agentrag.errors import (
    EXIT_BAD_INPUT,
    EXIT_BUG,
    EXIT_UNFINISHED,
    ContextLimitError,
    EndpointError,
    LLMError,
)
from agentrag.synth.driver import SynthBugs
from agentrag.synth.tracer import TracerSynth, run_tracer
from agentrag.synth.tracer.prompts import ANSWER_DOCS_SYSTEM
from agentrag.synth.tracer.schema import DocRecord, HopRecord
from agentrag.testing import FakeRetriever, ScriptedLLM, StubOpenAIServer


def _lines(path: Path) -> list[str]:
    return [x for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def _stub_run(out: Path, url: str) -> dict[str, Any]:
    llm = stub_llm_yaml(out.parent / f"{out.name}-llm.yaml", url)
    return run_tracer(run_config(out), out, llm=llm, kb=FakeRetriever(PASSAGES), passages=PASSAGES)


@pytest.fixture(scope="module")
def kb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from agentrag.kb import KBConfig, KnowledgeBase
    from agentrag.testing import HashEmbedder

    out = tmp_path_factory.mktemp("tracerkb") / "kb"
    KnowledgeBase.build(PASSAGES, out, KBConfig(method="bm25"), embedder=HashEmbedder(), progress=False)
    return out


def _cli(out: Path, kb: Path, url: str) -> Any:
    excl = out.parent / f"{out.name}-excluded.txt"
    excl.write_text("Excluded Title\n")
    llm = stub_llm_yaml(out.parent / f"{out.name}-llm.yaml", url)
    return CliRunner().invoke(app, ["synth", "tracer", "--kb", str(kb), "--llm", llm, "--docs", "4", "--max-hops",
                                    "2", "--exclude", str(excl), "--out", str(out), "--set", "concurrency=1",
                                    "--set", "compose.method=bm25", "--set", "sampling.min_chars=0"])


# --- 401: the run stops, nothing finished is written, a healthy rerun makes the calls -------------------
def test_401_stops_the_run_with_nothing_finished_and_a_healthy_rerun_calls(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with StubOpenAIServer(["401"] * 50, reply=stub_reply) as bad, pytest.raises(EndpointError):
        _stub_run(out, bad.base_url)
    assert bad.requests == 1  # stopped at the first one
    for stage in ("docs", "atomic", "hop2", "hop3", "hop4"):
        assert _lines(out / f"{stage}.jsonl") == [], stage
    assert not (out / "metrics.json").exists() and not (out / "benchmark.jsonl").exists()
    with StubOpenAIServer(reply=stub_reply) as good:
        m = _stub_run(out, good.base_url)
        assert good.requests > 20
    assert m["unfinished"] == 0 and len(_lines(out / "benchmark.jsonl")) == 3


def test_cli_401_exits_2_and_writes_no_documents(tmp_path: Path, kb_dir: Path) -> None:
    out = tmp_path / "run"
    with StubOpenAIServer(["401"] * 50, reply=stub_reply) as bad:
        res = _cli(out, kb_dir, bad.base_url)
    assert res.exit_code == EXIT_BAD_INPUT, res.output
    assert _lines(out / "docs.jsonl") == []
    with StubOpenAIServer(reply=stub_reply) as good:
        res = _cli(out, kb_dir, good.base_url)
        assert good.requests > 0
    assert res.exit_code == 0, res.output
    assert len(_lines(out / "docs.jsonl")) == 4


# --- outages: the item is unfinished (exit 3), a rerun finishes it ---------------------------------------
@pytest.mark.parametrize("fault", ["500", "no_message", "content_null", "usage_str"])
def test_outage_leaves_the_document_unfinished_and_a_rerun_finishes(tmp_path: Path, fault: str) -> None:
    out = tmp_path / "run"
    with StubOpenAIServer([fault], reply=stub_reply) as srv:
        m = _stub_run(out, srv.base_url)
    assert m["unfinished"] == 1 and m["unfinished_by_stage"] == {"sample": 1}
    assert [r["unfinished"] for r in m["funnel"] if r["stage"] == "sample"] == [1]
    docs = [DocRecord.model_validate_json(x) for x in _lines(out / "docs.jsonl")]
    assert len(docs) == 3 and all(d.status == "ok" for d in docs)  # never a failed record
    with StubOpenAIServer(reply=stub_reply) as srv:
        m = _stub_run(out, srv.base_url)
    assert m["unfinished"] == 0 and len(_lines(out / "docs.jsonl")) == 4
    assert len(_lines(out / "benchmark.jsonl")) == 3


def test_cli_outage_exits_3_and_rerun_exits_0(tmp_path: Path, kb_dir: Path) -> None:
    out = tmp_path / "run"
    with StubOpenAIServer(["500", "500"], reply=stub_reply) as srv:
        res = _cli(out, kb_dir, srv.base_url)
    assert res.exit_code == EXIT_UNFINISHED, res.output
    with StubOpenAIServer(reply=stub_reply) as srv:
        res = _cli(out, kb_dir, srv.base_url)
    assert res.exit_code == 0, res.output


def test_an_outage_in_verification_records_the_hop_neither_verified_nor_rejected(tmp_path: Path) -> None:
    inner, down = world_llm(), {"on": True}

    def flaky(messages, **kw):  # type: ignore[no-untyped-def]
        user = messages[-1].content or ""
        if down["on"] and messages[0].content == ANSWER_DOCS_SYSTEM and "Which theological perspective is " \
                "associated with the type of church" in user:  # the solvability check of hop 2
            raise LLMError("HTTP 503", is_retryable=True)
        return inner.default(messages, **kw)  # type: ignore[misc,operator]

    m = run_world(tmp_path, llm=ScriptedLLM(default=flaky))
    assert _lines(tmp_path / "hop2.jsonl") == [] and m["unfinished_by_stage"] == {"hop2": 1}
    down["on"] = False
    run_world(tmp_path, llm=ScriptedLLM(default=flaky))
    rec = HopRecord.model_validate_json(_lines(tmp_path / "hop2.jsonl")[0])
    assert rec.status == "verified"


# --- over the context window: a flagged record ----------------------------------------------------------
def test_context_limit_is_a_flagged_record(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with StubOpenAIServer(["context"], reply=stub_reply) as srv:
        m = _stub_run(out, srv.base_url)
    assert m["unfinished"] == 0
    docs = [DocRecord.model_validate_json(x) for x in _lines(out / "docs.jsonl")]
    failed = [d for d in docs if d.status == "failed"]
    assert len(docs) == 4 and len(failed) == 1 and (failed[0].reason or "").startswith("context_limit")
    assert [r["rejected"] for r in m["funnel"] if r["stage"] == "sample"] == [{"context_limit": 1}]


# --- a bug: SynthBugs after the metrics are written; CLI exit 1 ------------------------------------------
def _buggy_atomic(monkeypatch: pytest.MonkeyPatch) -> None:
    import agentrag.synth.tracer.pipeline as pipeline

    real = pipeline.atomic_qa

    def buggy(oracle: Any, doc: DocRecord) -> Any:
        if doc.title == "Wesleyanism":
            raise KeyError("a bug")
        return real(oracle, doc)

    monkeypatch.setattr(pipeline, "atomic_qa", buggy)


def test_a_bug_raises_synthbugs_after_writing_metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _buggy_atomic(monkeypatch)
    with pytest.raises(SynthBugs, match="KeyError"):
        run_world(tmp_path)
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["bugs"] == 1 and m["unfinished_by_stage"] == {"atomic": 1}
    assert len(_lines(tmp_path / "atomic.jsonl")) == 3  # the other documents are recorded


def test_cli_bug_exits_1(tmp_path: Path, kb_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _buggy_atomic(monkeypatch)
    with StubOpenAIServer(reply=stub_reply) as srv:
        res = _cli(tmp_path / "run", kb_dir, srv.base_url)
    assert res.exit_code == EXIT_BUG, res.output


# --- metrics: the driver's typed object, the funnel from the declaration, `llm` in the report ------------
def test_metrics_shape_funnel_and_llm_usage_in_the_report(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with StubOpenAIServer(reply=stub_reply) as srv:
        m = _stub_run(out, srv.base_url)
    assert m == json.loads((out / "metrics.json").read_text())
    assert m["synthesizer"] == "tracer" and m["name"] == "run" and m["unfinished"] == 0 and m["bugs"] == 0
    declared = [s.name for s in TracerSynth.stages]
    assert [r["stage"] for r in m["funnel"]] == declared  # every stage of a 4-hop run, in declared order
    for row in m["funnel"]:
        assert set(row) == {"stage", "input", "output", "in", "out", "rejected", "unfinished", "unit"}
    pairs = next(r for r in m["funnel"] if r["stage"] == "pairs")
    assert (pairs["in"], pairs["out"], pairs["rejected"]) == (2, 1, {"numeric_answer": 1})
    assert next(r for r in m["funnel"] if r["stage"] == "export")["out"] == 3
    assert list(m["llm"]) == ["llm+judge"] and m["llm"]["llm+judge"]["misses"] > 0  # one LLM plays both roles
    assert m["calls_by_level"]["4"]["verified"] == 1 and m["calls_by_stage"]["sample"] == 4
    report = (out / "report.md").read_text()
    assert "LLM usage" in report and "llm+judge" in report and "misses" in report


# --- the same classes raised in-process by the LLM (what the OpenAI backend turns 401/400 into) -----------
def _raising(exc: Exception, when: str) -> ScriptedLLM:
    inner = world_llm()

    def reply(messages, **kw):  # type: ignore[no-untyped-def]
        if when in (messages[-1].content or ""):
            raise exc
        return inner.default(messages, **kw)  # type: ignore[misc,operator]

    return ScriptedLLM(default=reply)


def test_endpoint_error_mid_run_stops_it_and_writes_nothing_from_the_failing_call(tmp_path: Path) -> None:
    llm = _raising(EndpointError("401 from http://llm: check the key", status=401), "Second question:")
    with pytest.raises(EndpointError):
        run_world(tmp_path, llm=llm)
    # hops start as soon as their chain's atomic record is written (the atomic QA and the hops run as
    # one flow), so the 401 of a hop stops the atomic QA not started yet too: at least the document
    # whose chain asked the failing question has its record, the others are redone on the rerun
    assert _lines(tmp_path / "hop2.jsonl") == [] and 1 <= len(_lines(tmp_path / "atomic.jsonl")) <= 4
    assert not (tmp_path / "metrics.json").exists()
    run_world(tmp_path)  # a healthy rerun finishes
    assert len(_lines(tmp_path / "benchmark.jsonl")) == 3


def test_context_limit_in_verification_is_a_flagged_hop(tmp_path: Path) -> None:
    llm = _raising(ContextLimitError("over the context window: 9098 > 8192 tokens"), "Composed question:")
    m = run_world(tmp_path, llm=llm)
    assert m["unfinished"] == 0
    rec = HopRecord.model_validate_json(_lines(tmp_path / "hop2.jsonl")[0])
    assert rec.status == "failed" and "semantic: context_limit" in (rec.reason or "")
    assert _lines(tmp_path / "benchmark.jsonl") == []
