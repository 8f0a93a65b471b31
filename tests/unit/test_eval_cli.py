"""`agentrag eval` end to end with a scripted LLM and an in-memory retriever (no models)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import agentrag.kb
import agentrag.llm
from agentrag.cli.main import app
from agentrag.records import Passage, ToolCall
from agentrag.testing import FakeRetriever, ScriptedLLM

runner = CliRunner()


def _reply(messages, **kwargs):
    if kwargs.get("response_format"):  # the judge
        return '{"reason": "same", "score": 2}'
    if any(m.role == "tool" for m in messages):
        return "<answer>Rush</answer>"
    return ToolCall(name="dense_search", arguments={"query": messages[-1].content})


@pytest.fixture()
def fakes(monkeypatch):
    made = {}

    def resolve_llm(ref="embedded", *, cache=None, **overrides):
        made[ref] = llm = ScriptedLLM(default=_reply)
        made["cache"] = cache
        return llm

    passages = [Passage(id="p1", title="Neil Peart", text="Neil Peart was the drummer of Rush.")]
    monkeypatch.setattr(agentrag.llm, "resolve_llm", resolve_llm)
    monkeypatch.setattr("agentrag.llm.resolve.check_llm_ref", lambda ref, **kw: None)  # fake refs
    monkeypatch.setattr(agentrag.kb, "resolve_retriever", lambda ref: FakeRetriever(passages), raising=False)
    return made


def test_eval_command_writes_run_and_resumes(tmp_path, data_dir, fakes):
    out = tmp_path / "run"
    args = ["eval", "--dataset", str(data_dir / "hotpotqa" / "dev_distractor_200.jsonl"), "--kb", "kbdir",
            "--agent", "react", "--llm", "agent-llm", "--judge", "judge-llm", "--limit", "3", "-j", "2",
            "--out", str(out), "--set", "agent_config.max_steps=3"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "report:" in res.output and "EM=" in res.output
    assert fakes["agent-llm"].calls == 6 and fakes["judge-llm"].calls == 3
    assert fakes["cache"] == out / "llm_cache.sqlite"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n"] == 3 and metrics["em"] == pytest.approx(1 / 3, abs=1e-3)  # the first answer is Rush
    assert metrics["judge_pass"] == 1.0 and metrics["mean_steps"] == 1.0
    assert metrics["hops"]["by_hops"]["2"]["collapse_rate"] == 1.0  # 1 step < 2 hops
    assert (out / "report.html").read_text().count("<rect") == 1
    assert "agent_config" in (out / "config.yaml").read_text()

    fakes.clear()
    def mtimes():  # the writer lock is taken by every invocation
        return {p.name: p.stat().st_mtime_ns for p in out.iterdir() if p.name != ".agentrag.lock"}

    before = mtimes()
    res = runner.invoke(app, args)  # a no-op rerun: the finished run's metrics, no LLM built, nothing written
    assert res.exit_code == 0, res.output
    assert "EM=33.3" in res.output and not fakes
    assert mtimes() == before

    (out / "results.jsonl").touch()  # a data file changed: the full resume, nothing left to evaluate
    res = runner.invoke(app, [*args[:-2], "--set", "agent_config.max_steps=3"])
    assert res.exit_code == 0, res.output
    assert fakes["agent-llm"].calls == 0 and fakes["judge-llm"].calls == 0
    assert len((out / "results.jsonl").read_text().splitlines()) == 3


def test_eval_command_user_errors(tmp_path, fakes):
    res = runner.invoke(app, ["eval", "--kb", "x", "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and "no dataset" in res.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "question": "q", "golden_answers": "a"}\n')
    res = runner.invoke(app, ["eval", "--dataset", str(bad), "--kb", "x", "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and "bad.jsonl:1: field 'golden_answers'" in " ".join(res.output.split())
    res = runner.invoke(app, ["eval", "--dataset", str(bad), "--kb", "x", "--out", str(tmp_path / "r"),
                              "--set", "concurency=3"])
    assert res.exit_code == 2 and "concurrency" in res.output


def test_eval_command_health_checks_a_kb_url_and_reports_unfinished(tmp_path, monkeypatch):
    from agentrag.errors import LLMError

    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": f"who drums {i}?", "golden_answers": ["Rush"]})
                            + "\n" for i in range(3)))
    res = runner.invoke(app, ["eval", "--dataset", str(data), "--kb", "http://127.0.0.1:9", "--llm", "openai:m@http://127.0.0.1:9/v1", "--out",
                              str(tmp_path / "r0")])
    assert res.exit_code == 2 and "GET /health" in " ".join(res.output.split())
    assert not (tmp_path / "r0" / "results.jsonl").exists()

    def flaky(messages, **kwargs):  # the 2nd question's first call hits an LLM outage
        if "who drums 1?" in (messages[-1].content or "") and not any(m.role == "tool" for m in messages):
            raise LLMError("backend unreachable after 5 attempts", is_retryable=True)
        return _reply(messages, **kwargs)

    monkeypatch.setattr(agentrag.llm, "resolve_llm", lambda ref="embedded", **kw: ScriptedLLM(default=flaky))
    monkeypatch.setattr(agentrag.kb, "resolve_retriever", lambda ref: FakeRetriever(
        [Passage(id="p1", title="Neil Peart", text="Neil Peart was the drummer of Rush.")]), raising=False)
    out = tmp_path / "r1"
    res = runner.invoke(app, ["eval", "--dataset", str(data), "--kb", "kbdir", "--agent", "react", "--llm", "openai:m",
                              "--out", str(out)])
    assert res.exit_code == 3, res.output  # items left unfinished: rerun to finish them
    assert "1 items unfinished (LLMError: 1)" in " ".join(res.output.split())
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n"] == 2 and metrics["unfinished"] == 1 and metrics["unfinished_reasons"] == {"LLMError": 1}
