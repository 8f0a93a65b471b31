"""`agentrag eval --agent planner_executor --executor-llm REF`: the executor role runs on the second
LLM, the planner on --llm (scripted LLMs, in-memory retriever)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

import agentrag.kb
import agentrag.llm
from agentrag.cli.main import app
from agentrag.records import Passage
from agentrag.testing import FakeRetriever, ScriptedLLM


def _planner(messages, **kw):
    if any((m.content or "").startswith("Observation:") for m in messages):
        return "<think>The drummer is known.</think><answer>Neil Peart</answer>"
    return '<think>Find the drummer.</think><action>Search("Who was the drummer of Rush?")</action>'


def _executor(messages, **kw):
    return "<think>[0] names him.</think><select>[0]</select><answer>Neil Peart was the drummer of Rush.</answer>"


def test_eval_executor_llm_plays_the_executor(tmp_path, monkeypatch):
    made: dict[str, ScriptedLLM] = {}

    def resolve_llm(ref="embedded", *, cache=None, **overrides):
        made[ref] = llm = ScriptedLLM(default=_executor if ref == "exec-llm" else _planner, model=ref)
        return llm

    checked: list[str] = []
    monkeypatch.setattr(agentrag.llm, "resolve_llm", resolve_llm)
    monkeypatch.setattr("agentrag.llm.resolve.check_llm_ref", lambda ref, **kw: checked.append(ref))
    passages = [Passage(id="p1", title="Rush", text="Neil Peart was the drummer of Rush.")]
    monkeypatch.setattr(agentrag.kb, "resolve_retriever", lambda ref: FakeRetriever(passages), raising=False)
    ds = tmp_path / "qa.jsonl"
    ds.write_text(json.dumps({"id": "1", "question": "Who was the drummer of Rush?",
                              "golden_answers": ["Neil Peart"]}) + "\n")
    res = CliRunner().invoke(app, ["eval", "--dataset", str(ds), "--kb", "kbdir", "--agent", "planner_executor",
                                   "--llm", "plan-llm", "--executor-llm", "exec-llm", "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    assert "exec-llm" in checked  # the reference is checked before the run, like --llm
    assert made["plan-llm"].calls == 2 and made["exec-llm"].calls == 1
    from agentrag.agents.pe_protocol import EXECUTOR_SYSTEM, PLANNER_SYSTEM

    assert [r["messages"][0].content for r in made["exec-llm"].requests] == [EXECUTOR_SYSTEM]
    assert {r["messages"][0].content for r in made["plan-llm"].requests} == {PLANNER_SYSTEM}
    row = json.loads((tmp_path / "r" / "results.jsonl").read_text().splitlines()[0])
    assert row["trajectory"]["answer"] == "Neil Peart" and row["trajectory"]["metadata"]["topk_per_step"] == [5]
    assert "executor_llm: exec-llm" in (tmp_path / "r" / "config.yaml").read_text()
