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


def _pref(i: int) -> PreferencePair:
    city = ["Paris", "Madrid"][i % 2]
    return PreferencePair(
        id=f"q{i}",
        prompt=[Message(role="system", content="Answer with the city in answer tags."),
                Message(role="user", content=f"Where is landmark {i}? Doc 1: the landmark is in {city}.")],
        chosen=[Message(role="assistant", content=f"<answer>{city}</answer>")],
        rejected=[Message(role="assistant", content="So the next query is <query>landmark location</query>")])


def test_train_dpo_loss_falls_and_the_batch_pairs_differ(tmp_path, monkeypatch):
    """More than the first-step ln 2 (true for any input): on a small pair set the DPO loss falls
    over a few steps, and in the batch the trainer sees, chosen and rejected completion tokens differ."""
    import trl

    from agentrag.export.dpo import write_dpo_export
    from agentrag.train.config import DPOTrainConfig
    from agentrag.train.dpo import train_dpo

    seen: list[dict] = []

    class Recording(trl.DPOTrainer):
        def compute_loss(self, model, inputs, *args, **kwargs):
            seen.append({k: v.detach().clone() for k, v in inputs.items() if hasattr(v, "detach")})
            return super().compute_loss(model, inputs, *args, **kwargs)

    monkeypatch.setattr(trl, "DPOTrainer", Recording)
    write_dpo_export(tmp_path / "export", [_pref(0), _pref(1)])
    cfg = DPOTrainConfig(max_steps=4, batch_size=2, learning_rate=5e-5, beta=0.5, max_length=128,
                         save_model=False)
    metrics = train_dpo(tmp_path / "export" / "trl_dpo.jsonl", tmp_path / "run", cfg)
    losses = metrics["losses"]
    assert metrics["global_step"] == 4 and len(losses) == 4 and metrics["finite"]
    assert math.isclose(losses[0], math.log(2), rel_tol=1e-3)
    assert losses[-1] < losses[0] - 0.05, losses  # the policy moved toward the chosen side
    batch = seen[0]
    ids, mask = batch["input_ids"], batch["completion_mask"]
    half = ids.shape[0] // 2
    assert half == 2  # chosen rows first, then their rejected rows
    for i in range(half):
        chosen = ids[i][mask[i].bool()].tolist()
        rejected = ids[i + half][mask[i + half].bool()].tolist()
        assert chosen and rejected and chosen != rejected
