"""`agentrag train dpo` on the embedded SmolLM2: one step on exported pairs with tool calls."""

from __future__ import annotations

import json
import math

import pytest

from agentrag.records import Message, PreferencePair, ToolCall, write_jsonl

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def _pair(i: int) -> PreferencePair:
    args = {"query": f"landmark {i}"} if i % 2 else {"query": f"landmark {i}", "top_k": 2}
    return PreferencePair(
        id=f"p{i}",
        prompt=[Message(role="system", content="Search, then answer."),
                Message(role="user", content=f"Where is landmark {i}?")],
        chosen=[Message(role="assistant", content="Search first.",
                        tool_calls=[ToolCall(id="c0", name="dense_search", arguments=args)]),
                Message(role="tool", tool_call_id="c0", content="Doc 1 The landmark is in Paris."),
                Message(role="assistant", content="<answer>Paris</answer>")],
        rejected=[Message(role="assistant", content="<answer>Rome</answer>")])


def test_train_dpo_one_step(tmp_path):
    from typer.testing import CliRunner

    from agentrag.cli.main import app

    runner = CliRunner()
    write_jsonl(tmp_path / "pairs.jsonl", [_pair(0), _pair(1)])
    (tmp_path / "tools.json").write_text(json.dumps([{"type": "function", "function": {
        "name": "dense_search", "description": "Search.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}]))
    res = runner.invoke(app, ["export", "dpo", "--pairs", str(tmp_path / "pairs.jsonl"), "--out",
                              str(tmp_path / "export"), "--tools", str(tmp_path / "tools.json")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["train", "dpo", "--data", str(tmp_path / "export" / "trl_dpo.jsonl"),
                              "--out", str(tmp_path / "run"), "--max-steps", "1", "--set", "max_length=256",
                              "--set", "save_model=false"])
    assert res.exit_code == 0, res.output
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["global_step"] == 1 and metrics["finite"]
    # at the first step the policy equals the reference model: the DPO loss is ln 2
    assert math.isclose(metrics["losses"][0], math.log(2), rel_tol=1e-3)
