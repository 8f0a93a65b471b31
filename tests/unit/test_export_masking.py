"""The SFT export trains assistant tokens only: every observation token is masked (RAGShaper Eq. 9).

Tokenizes exported records with TRL's ChatML training template and an in-memory byte-level ChatML
tokenizer (``agentrag.testing.chatml_byte_tokenizer``: no model files), then checks the mask
character span by character span. tests/integration/test_export_masking_embedded.py runs the same
checks with the real SmolLM2 tokenizer.
"""

from __future__ import annotations

import json

import pytest

from agentrag.export.masking import assistant_mask, render, training_chat_template
from agentrag.export.sft import to_trl_records
from agentrag.records import Step, ToolCall, Trajectory
from extras_check import require_module

require_module("transformers", "train")
require_module("trl", "train")


@pytest.fixture(scope="session")
def tokenizer():
    from agentrag.testing import chatml_byte_tokenizer

    return chatml_byte_tokenizer()


TOOLS = [{"type": "function", "function": {
    "name": "dense_search", "description": "search",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}]


def _traj(i: int) -> Trajectory:
    steps = [Step(thought=f"THOUGHT-{i}-{j}: look up part {j}.",
                  action=ToolCall(id=f"c{j}", name="dense_search", arguments={"query": f"QUERY-{i}-{j}"}),
                  observation=f"Doc 1 (Title: Paris) OBSERVATION-{i}-{j} the city is large.\nDoc 2 more text {j}")
             for j in range(i + 1)]
    steps.append(Step(thought=f"FINAL-{i} reasoning. <answer>ANSWER-{i}</answer>"))
    return Trajectory(id=f"t{i}", question=f"USER-QUESTION-{i}?", steps=steps, answer=f"ANSWER-{i}")


@pytest.fixture(scope="session")
def records():
    return to_trl_records([_traj(i) for i in range(3)], "SYSTEM-PROMPT: search then answer.", TOOLS)


def _spans(text: str, needle: str, start: int) -> tuple[int, int]:
    pos = text.index(needle, start)
    return pos, pos + len(needle)


def _mask_over(span, offsets, mask):
    """Mask values of the tokens overlapping the character span."""
    lo, hi = span
    return [m for (a, b), m in zip(offsets, mask) if a < hi and b > lo and b > a]


def test_observations_masked_assistant_trained(tokenizer, records):
    for rec in records:
        toks = assistant_mask(rec, tokenizer)
        text = render(rec, tokenizer)
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        assert enc["input_ids"] == toks.input_ids  # the mask lines up with the rendered text
        offsets, mask = enc["offset_mapping"], toks.assistant_mask
        cursor = 0
        n_tool = n_assistant = 0
        for msg in rec["messages"]:
            pieces = []
            if msg["content"]:
                pieces.append(msg["content"])
            for tc in msg.get("tool_calls", []):
                pieces.append(json.dumps(tc["function"]["arguments"]))
            for piece in pieces:
                span = _spans(text, piece, cursor)
                cursor = span[1]
                covered = _mask_over(span, offsets, mask)
                assert covered, piece
                if msg["role"] == "assistant":
                    n_assistant += 1
                    assert all(covered), f"assistant text not fully trained: {piece!r}"
                else:
                    if msg["role"] == "tool":
                        n_tool += 1
                    assert not any(covered), f"{msg['role']} text leaks into the loss: {piece!r}"
        assert n_tool >= 1 and n_assistant >= 2
        # the trained tokens are exactly the assistant turns: decode them and compare
        trained = tokenizer.decode([t for t, m in zip(toks.input_ids, mask) if m])
        assert "OBSERVATION" not in trained and "USER-QUESTION" not in trained and "SYSTEM-PROMPT" not in trained
        assert "<tool_call>" in trained and "dense_search" in trained and "<|im_end|>" in trained
        assert trained.count("<|im_end|>") == sum(m["role"] == "assistant" for m in rec["messages"])


def test_tool_response_wrapper_is_masked(tokenizer, records):
    rec = records[1]
    toks = assistant_mask(rec, tokenizer)
    masked = tokenizer.decode([t for t, m in zip(toks.input_ids, toks.assistant_mask) if not m])
    assert masked.count("<tool_response>") == 2 and "OBSERVATION-1-1" in masked


def test_template_comes_from_installed_trl():
    import importlib.resources

    tpl = training_chat_template()
    assert "{% generation %}" in tpl.replace("{%- generation %}", "{% generation %}")
    assert tpl == (importlib.resources.files("trl") / "chat_templates" / "qwen2_5_training.jinja").read_text()


def test_tokenize_sft_labels_follow_the_mask(tokenizer, records):
    from agentrag.errors import UserError
    from agentrag.train.sft import tokenize_sft

    rows = tokenize_sft(records, tokenizer, max_length=4096)
    for rec, row in zip(records, rows):
        toks = assistant_mask(rec, tokenizer)
        assert row["input_ids"] == toks.input_ids
        assert row["labels"] == [t if m else -100 for t, m in zip(toks.input_ids, toks.assistant_mask)]
    # cut just past the first assistant token of every record: each row is kept, truncated
    cut = max(assistant_mask(rec, tokenizer).assistant_mask.index(1) for rec in records) + 10
    short = tokenize_sft(records, tokenizer, max_length=cut)
    assert len(short) == len(records) and all(len(r["input_ids"]) == cut for r in short)
    with pytest.raises(UserError, match="max_length=20"):
        tokenize_sft(records, tokenizer, max_length=20)  # only the system prompt fits: nothing to train


def test_train_config_rejects_typos_and_plans_dpo_steps():
    from agentrag.config import load_config
    from agentrag.errors import UserError
    from agentrag.train.config import DPOTrainConfig, SFTTrainConfig
    from agentrag.train.dpo import planned_steps

    with pytest.raises(UserError, match="learning_rate"):
        load_config(SFTTrainConfig, overrides=["learning_rat=1e-4"])
    cfg = load_config(DPOTrainConfig, overrides=["batch_size=2", "epochs=2"])
    assert planned_steps(5, cfg) == 5
    assert planned_steps(5, cfg.model_copy(update={"max_steps": 3})) == 3


def test_labels_match_trl_assistant_only_loss(tokenizer, records, tmp_path):
    """Differential: our labels equal those TRL's SFTTrainer builds itself with
    assistant_only_loss=True and chat_template_path=qwen2_5_training.jinja (a tiny random model)."""
    import copy

    from datasets import Dataset
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl import SFTConfig, SFTTrainer

    from agentrag.export.masking import training_chat_template_path
    from agentrag.train.sft import tokenize_sft

    tok = copy.deepcopy(tokenizer)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2))
    args = SFTConfig(output_dir=str(tmp_path), assistant_only_loss=True, report_to=[], bf16=False,
                     chat_template_path=training_chat_template_path(), max_length=4096,
                     gradient_checkpointing=False)
    # tools as a JSON string (TRL parses it); the arguments have the same keys in every record here
    rows = [{"messages": r["messages"], "tools": json.dumps(r["tools"])} for r in records]
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tok)
    theirs = trainer.train_dataset
    ours = tokenize_sft(records, tokenizer, max_length=4096)
    assert len(theirs) == len(ours)
    for i, row in enumerate(ours):
        assert theirs[i]["input_ids"] == row["input_ids"]
        assert theirs[i]["labels"] == row["labels"]
