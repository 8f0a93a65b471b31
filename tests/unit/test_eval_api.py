"""``run_eval`` from Python alone (no CLI): objects or references, resume, the LLM-usage block, and
the failure policy's outcomes (a plain ConnectionError is an outage, a bug raises EvalBugs after
writing, a context-limit is a flagged wrong answer)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_eval_outages import PASSAGES, plan_step_policy
from typer.testing import CliRunner

import agentrag.kb
import agentrag.llm
from agentrag.errors import ContextLimitError, UserError
from agentrag.eval.judge import LLMJudge
from agentrag.eval.run import EvalBugs, run_eval
from agentrag.eval.runner import EvalConfig
from agentrag.records import Message
from agentrag.testing import FakeRetriever, ScriptedLLM


def dataset(tmp_path, n: int = 4):
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is the capital of country {i}?",
                                        "golden_answers": [f"City {i}"]}) + "\n" for i in range(n)))
    return path


def question_of(messages: list[Message]) -> str:
    return messages[1].content or ""


def test_run_eval_with_objects_resumes_and_reports_llm_usage(tmp_path):
    data, out = dataset(tmp_path), tmp_path / "run"
    agent_llm = ScriptedLLM(default=plan_step_policy)
    judge = LLMJudge(ScriptedLLM(default='{"reason": "same", "score": 2}'))
    seen: list[str] = []
    progress: list[tuple[str, int, int]] = []
    cfg = EvalConfig(dataset=str(data), agent="plan_step", concurrency=2)
    metrics = run_eval(cfg, out, llm=agent_llm, retriever=FakeRetriever(PASSAGES), judge=judge, limit=3,
                       on_result=lambda r: seen.append(r.id), progress=lambda *a: progress.append(a))
    assert metrics["n"] == 3 and metrics["em"] == 1.0 and metrics["judge_pass"] == 1.0
    assert metrics["unfinished"] == 0 and metrics["bugs"] == 0 and sorted(seen) == ["q0", "q1", "q2"]
    assert progress[-1] == ("eval", 3, 3)
    assert set(metrics["llm"]) == {"agent", "judge"} and metrics["llm"]["judge"]["calls"] == 3
    assert json.loads((out / "metrics.json").read_text())["llm"] == metrics["llm"]
    assert (out / "report.html").exists() and "LLM usage" in (out / "report.md").read_text()
    assert "limit: 3" in (out / "config.yaml").read_text()

    again = ScriptedLLM(default=plan_step_policy)
    metrics = run_eval(cfg, out, llm=again, retriever=FakeRetriever(PASSAGES), judge=judge)  # 4 items now
    assert metrics["n"] == 4 and {question_of(r["messages"]) for r in again.requests} == {
        question_of(again.requests[0]["messages"])} and "country 3" in question_of(again.requests[0]["messages"])


def test_run_eval_with_references(tmp_path, monkeypatch):
    made: dict[str, Any] = {}

    def resolve_llm(ref="embedded", *, cache=None, **kw):
        made[ref] = ScriptedLLM(default=plan_step_policy)
        made["cache"] = cache
        return made[ref]

    monkeypatch.setattr(agentrag.llm, "resolve_llm", resolve_llm)
    monkeypatch.setattr("agentrag.llm.resolve.check_llm_ref", lambda ref, **kw: None)
    monkeypatch.setattr(agentrag.kb, "resolve_retriever", lambda ref: FakeRetriever(PASSAGES), raising=False)
    out = tmp_path / "run"
    metrics = run_eval(out=out, dataset=str(dataset(tmp_path, 2)), kb="kbdir", agent="plan_step", llm="m")
    assert metrics["n"] == 2 and made["cache"] == out / "llm_cache.sqlite" and made["m"].calls == 6
    assert list(metrics["llm"]) == ["agent"]


def test_run_eval_checks_inputs_before_writing(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(UserError, match="no dataset"):
        run_eval(out=out, kb="x")
    with pytest.raises(UserError, match="concurency"):
        run_eval(out=out, dataset=str(dataset(tmp_path)), concurency=3)
    with pytest.raises(UserError, match="unknown agent"):
        run_eval(out=out, dataset=str(dataset(tmp_path)), agent="nope", llm=ScriptedLLM(),
                 retriever=FakeRetriever(PASSAGES))
    with pytest.raises(UserError, match="out=DIR"):
        run_eval(dataset=str(dataset(tmp_path)))
    assert not out.exists()


def test_a_plain_connection_error_from_the_llm_or_the_retriever_is_an_outage(tmp_path):
    def llm_policy(messages: list[Message], **kwargs: Any) -> object:
        if "country 1" in question_of(messages):
            raise ConnectionError("connection reset by peer")
        return plan_step_policy(messages, **kwargs)

    class Flaky(FakeRetriever):
        def search(self, queries, k, threshold=None):
            if any("country 2" in q for q in queries):
                raise ConnectionRefusedError("retrieval server refused the connection")
            return super().search(queries, k, threshold)

    out = tmp_path / "run"
    metrics = run_eval(out=out, dataset=str(dataset(tmp_path)), agent="plan_step", concurrency=1,
                       llm=ScriptedLLM(default=llm_policy), retriever=Flaky(PASSAGES))
    assert metrics["n"] == 2 and metrics["em"] == 1.0  # the eval went on past both
    unfinished = json.loads((out / "unfinished.json").read_text())
    assert sorted(unfinished) == ["q1", "q2"] and metrics["unfinished"] == 2
    assert metrics["unfinished_reasons"] == {"ConnectionError": 1, "ConnectionRefusedError": 1}
    metrics = run_eval(out=out, dataset=str(dataset(tmp_path)), agent="plan_step", concurrency=1,
                       llm=ScriptedLLM(default=plan_step_policy), retriever=FakeRetriever(PASSAGES))
    assert metrics["n"] == 4 and metrics["unfinished"] == 0


def test_a_bug_leaves_the_item_unfinished_logs_the_traceback_and_raises_after_writing(tmp_path, caplog):
    def buggy(messages: list[Message], **kwargs: Any) -> object:
        if "country 1" in question_of(messages):
            raise ValueError("an agent bug")
        return plan_step_policy(messages, **kwargs)

    out = tmp_path / "run"
    with pytest.raises(EvalBugs, match="an agent bug") as exc:
        run_eval(out=out, dataset=str(dataset(tmp_path)), agent="plan_step", concurrency=1,
                 llm=ScriptedLLM(default=buggy), retriever=FakeRetriever(PASSAGES))
    assert exc.value.metrics["n"] == 3 and exc.value.metrics["bugs"] == 1
    assert json.loads((out / "metrics.json").read_text())["bugs"] == 1
    assert any(r.exc_info and "an agent bug" in str(r.exc_info[1]) for r in caplog.records)
    assert list(json.loads((out / "unfinished.json").read_text())) == ["q1"]


def test_the_cli_exits_1_on_a_bug(tmp_path, monkeypatch):
    from agentrag.cli.main import app

    def buggy(messages: list[Message], **kwargs: Any) -> object:
        if "country 0" in question_of(messages):
            raise ValueError("an agent bug")
        return plan_step_policy(messages, **kwargs)

    monkeypatch.setattr(agentrag.llm, "resolve_llm", lambda ref="embedded", **kw: ScriptedLLM(default=buggy))
    monkeypatch.setattr("agentrag.llm.resolve.check_llm_ref", lambda ref, **kw: None)
    monkeypatch.setattr(agentrag.kb, "resolve_retriever", lambda ref: FakeRetriever(PASSAGES), raising=False)
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["eval", "--dataset", str(dataset(tmp_path, 3)), "--kb", "k", "--agent",
                                   "plan_step", "--llm", "m", "-j", "1", "--out", str(out)])
    assert res.exit_code == 1, res.output
    assert "EvalBugs" in res.output and "n=2" in res.output
    assert len((out / "results.jsonl").read_text().splitlines()) == 2  # the other items were scored


def test_context_limit_is_scored_and_flagged_not_unfinished(tmp_path):
    script = ScriptedLLM(default=lambda m, **kw: ContextLimitError("9098 > 8192 tokens")
                         if "country 0" in question_of(m) and kw.get("tools") else plan_step_policy(m, **kw))
    out = tmp_path / "run"
    metrics = run_eval(out=out, dataset=str(dataset(tmp_path, 2)), agent="plan_step", concurrency=1, llm=script,
                       retriever=FakeRetriever(PASSAGES))
    assert metrics["n"] == 2 and metrics["unfinished"] == 0 and metrics["context_limit"] == 1
    assert metrics["finish_reasons"] == {"context_limit": 1, "answered": 1} and metrics["em"] == 0.5


def test_limit_zero_evaluates_nothing(tmp_path):
    from agentrag.eval.datasets import load_dataset

    data = dataset(tmp_path)
    assert load_dataset(data, limit=0) == [] and len(load_dataset(data, limit=1)) == 1
    llm = ScriptedLLM(default=plan_step_policy)
    m = run_eval(EvalConfig(dataset=str(data), agent="plan_step", limit=0, concurrency=1), tmp_path / "run",
                 llm=llm, retriever=FakeRetriever(PASSAGES))
    assert m["n"] == 0 and llm.calls == 0
    assert (tmp_path / "run" / "results.jsonl").read_text() == ""


def test_flashrag_gold_ids_feed_recall_and_the_viewer_marks_the_same(tmp_path):
    from agentrag.report.viewer.eval_view import gold_passages

    path = tmp_path / "qa.jsonl"
    recs = [{"id": "q0", "question": "What is the capital of country 0?", "golden_answers": ["City 0"],
             "metadata": {"supporting_passage_ids": ["p0", "p7"]}},
            {"id": "q1", "question": "What is the capital of country 1?", "golden_answers": ["City 1"],
             "metadata": {"supporting_doc_ids": ["p1"]}},
            {"id": "q2", "question": "What is the capital of country 2?", "golden_answers": ["City 2"]}]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = tmp_path / "run"
    run_eval(EvalConfig(dataset=str(path), agent="plan_step", concurrency=1), out,
             llm=ScriptedLLM(default=plan_step_policy), retriever=FakeRetriever(PASSAGES))
    results = {r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    golds = gold_passages(out)
    assert golds["q0"][0] == ["p0", "p7"] and golds["q1"][0] == ["p1"] and golds["q2"][0] == []
    hits0 = {h["id"] for s in results["q0"]["trajectory"]["steps"] for h in s.get("hits", [])}
    assert results["q0"]["recall"] == len({"p0", "p7"} & hits0) / 2 and "p0" in hits0
    assert results["q1"]["recall"] == 1.0
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**recs[0], "metadata": {"supporting_passage_ids": "p0"}}) + "\n")
    with pytest.raises(UserError, match=r"bad.jsonl:1: field 'metadata.supporting_passage_ids'"):
        agentrag.eval.load_dataset(bad)


def test_an_llm_backend_object_gets_the_runs_response_cache(tmp_path):
    """A backend passed as an object (what resolve_llm returns) is cached like a reference: the run
    writes llm_cache.sqlite, and the same questions in a fresh run directory over that cache cost
    no backend call; a fake is used as given."""
    import shutil

    from test_eval_outages import stub_reply

    from agentrag.llm.cache import CachedLLM, with_response_cache
    from agentrag.llm.openai_backend import OpenAIBackend
    from agentrag.testing import StubOpenAIServer

    data = dataset(tmp_path, n=2)
    with StubOpenAIServer(reply=stub_reply) as srv:
        llm = OpenAIBackend("stub", base_url=srv.base_url, max_retries=0)
        cfg = EvalConfig(dataset=str(data), agent="plan_step", concurrency=1)
        first = run_eval(cfg, tmp_path / "a", llm=llm, judge=llm, retriever=FakeRetriever(PASSAGES))
        assert (tmp_path / "a" / "llm_cache.sqlite").stat().st_size > 0 and first["em"] == 1.0
        assert set(first["llm"]) == {"agent+judge"} and first["llm"]["agent+judge"]["misses"] == srv.requests > 0
        (tmp_path / "b").mkdir()
        for f in (tmp_path / "a").glob("llm_cache.sqlite*"):  # with its WAL
            shutil.copy(f, tmp_path / "b" / f.name)
        before = srv.requests
        second = run_eval(cfg, tmp_path / "b", llm=llm, judge=llm, retriever=FakeRetriever(PASSAGES))
        assert srv.requests == before and second["llm"]["agent+judge"]["hits"] > 0 and second["em"] == 1.0
    fake = ScriptedLLM(default="x")
    assert with_response_cache(fake, tmp_path / "c.sqlite") is fake
    wrapped = CachedLLM(llm, tmp_path / "d.sqlite")
    assert with_response_cache(wrapped, tmp_path / "c.sqlite") is wrapped
    made: dict[int, Any] = {}
    one = with_response_cache(llm, tmp_path / "c.sqlite", made)
    assert isinstance(one, CachedLLM) and with_response_cache(llm, tmp_path / "c.sqlite", made) is one
