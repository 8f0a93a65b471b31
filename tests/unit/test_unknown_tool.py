"""A 200 reply that calls a tool the agent does not have is malformed model output: fed back to the
model as an error, counted toward max_format_errors and in metrics.json's unknown_tool_calls;
never retried as an outage, never a crash."""

from __future__ import annotations

import json
from typing import Any

from test_eval_failures import dataset, eval_args, fake_kb, llm_yaml  # noqa: F401
from test_eval_outages import stub_reply
from typer.testing import CliRunner

from agentrag.cli.main import app
from agentrag.testing import StubOpenAIServer


def test_an_unknown_tool_in_a_200_is_a_counted_malformed_turn(tmp_path, fake_kb):  # noqa: F811
    def reply(body: dict[str, Any]) -> Any:
        msgs = body["messages"]
        if body.get("tools") and not any(m["role"] == "tool" for m in msgs):  # the first step turn
            return {"tool_calls": [{"id": "c0", "type": "function", "function": {
                "name": "web_search", "arguments": json.dumps({"q": "capital"})}}]}
        return stub_reply(body)

    with StubOpenAIServer(reply=reply) as srv:
        res = CliRunner().invoke(app, eval_args(dataset(tmp_path, 1), tmp_path / "run",
                                                llm_yaml(tmp_path, "agent", srv.base_url)))
        assert srv.injected == []
    assert res.exit_code == 0, res.output
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["unknown_tool_calls"] == 1 and metrics["n"] == 1
    result = json.loads((tmp_path / "run" / "results.jsonl").read_text())
    [step] = [s for s in result["trajectory"]["steps"] if s["action"] and s["action"]["name"] == "web_search"]
    assert step["error"].startswith("unknown tool")
    assert result["em"] == 1.0  # the run went on: the model searched and answered after the error
