"""`agentrag train sft` on the embedded SmolLM2 (dequantized from GGUF): 2 steps on 4 exported records."""

from __future__ import annotations

import json
import math

import pytest

from agentrag.records import Step, ToolCall, Trajectory, write_jsonl

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def _traj(i: int) -> Trajectory:
    return Trajectory(
        id=f"t{i}", question=f"Which city hosts landmark number {i}?",
        steps=[Step(thought=f"I should search for landmark {i}.",
                    action=ToolCall(id="c0", name="dense_search", arguments={"query": f"landmark {i} location"}),
                    observation=f"Doc 1 (Title: Landmark {i}) Landmark {i} stands in Paris, France."),
               Step(thought=f"The document places landmark {i} in Paris. <answer>Paris</answer>")],
        answer="Paris")


def test_train_sft_two_steps_writes_checkpoint(tmp_path):
    from typer.testing import CliRunner

    from agentrag.cli.main import app

    runner = CliRunner()
    write_jsonl(tmp_path / "trajs.jsonl", [_traj(i) for i in range(4)])
    # a short tool schema and system prompt keep the sequences (and the CPU time) small
    (tmp_path / "tools.json").write_text(json.dumps([{"type": "function", "function": {
        "name": "dense_search", "description": "Search the knowledge base.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}]))
    res = runner.invoke(app, ["export", "sft", "--trajectories", str(tmp_path / "trajs.jsonl"),
                              "--out", str(tmp_path / "export"), "--tools", str(tmp_path / "tools.json"),
                              "--system-prompt", "Search, then answer in <answer></answer> tags."])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["train", "sft", "--data", str(tmp_path / "export" / "trl_sft.jsonl"),
                              "--out", str(tmp_path / "run"), "--model", "embedded", "--max-steps", "2",
                              "--set", "max_length=512", "--set", "learning_rate=1e-4"])
    assert res.exit_code == 0, res.output
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["global_step"] == 2 and metrics["records"] == 4
    assert len(metrics["losses"]) == 2 and all(math.isfinite(x) and x > 0 for x in metrics["losses"])
    assert 0 < metrics["trained_tokens"] < metrics["tokens"]  # observations and prompts are masked
    ckpt = tmp_path / "run" / "checkpoint"
    assert (ckpt / "config.json").exists() and any(ckpt.glob("*.safetensors"))
    assert "quantization_config" not in json.loads((ckpt / "config.json").read_text())

    # the checkpoint loads back as a plain HF model and its loss on the training data is finite
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agentrag.export.masking import assistant_mask
    from agentrag.export.sft import read_trl_records

    model = AutoModelForCausalLM.from_pretrained(str(ckpt), dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(str(ckpt))
    toks = assistant_mask(read_trl_records(tmp_path / "export" / "trl_sft.jsonl")[0], tok)
    ids = torch.tensor([toks.input_ids])
    labels = torch.tensor([[t if m else -100 for t, m in zip(toks.input_ids, toks.assistant_mask)]])
    with torch.no_grad():
        loss = model(input_ids=ids, labels=labels).loss.item()
    assert math.isfinite(loss) and loss > 0
