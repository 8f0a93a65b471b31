"""The test fakes behave as their docstrings say (they drive the gate tests and the benchmarks)."""

from __future__ import annotations

from agentrag.records import Message
from agentrag.testing import ScriptedLLM


def test_scripted_llm_logs_requests_unless_told_not_to():
    msgs = [Message(role="user", content="hi")]
    logged, quiet = ScriptedLLM(default="a"), ScriptedLLM(default="a", record=False)
    for llm in (logged, quiet):
        assert [c.text for c in llm.chat(msgs, temperature=0.5)] == ["a"]
        assert [c.text for c in llm.chat(msgs)] == ["a"]
        assert llm.calls == 2
    assert [r["messages"][0].content for r in logged.requests] == ["hi", "hi"]
    assert logged.requests[0]["temperature"] == 0.5
    assert quiet.requests == []
