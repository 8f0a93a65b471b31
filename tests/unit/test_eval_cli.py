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

    res = runner.invoke(app, args)  # resume: nothing left to do
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
