"""Observation masking (RAGShaper Eq. 9) with the real SmolLM2 tokenizer read from the embedded GGUF.

tests/unit/test_export_masking.py checks the same with an in-memory tokenizer; this file checks
that the installed model's tokenizer gives the same guarantees.
"""

from __future__ import annotations

import pytest

from agentrag.export.masking import assistant_mask
from agentrag.export.sft import to_trl_records
from agentrag.records import Step, ToolCall, Trajectory
from extras_check import require_module

pytestmark = [pytest.mark.slow, pytest.mark.integration]

require_module("transformers", "train")
require_module("gguf", "train")

TOOLS = [{"type": "function", "function": {
    "name": "dense_search", "description": "search",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}]


def _traj(i: int) -> Trajectory:
    steps = [Step(thought=f"THOUGHT-{i}-{j}: look up part {j}.",
                  action=ToolCall(id=f"c{j}", name="dense_search", arguments={"query": f"QUERY-{i}-{j}"}),
                  observation=f"Doc 1 (Title: Paris) OBSERVATION-{i}-{j} the city is large.")
             for j in range(i + 1)]
    steps.append(Step(thought=f"FINAL-{i} reasoning. <answer>ANSWER-{i}</answer>"))
    return Trajectory(id=f"t{i}", question=f"USER-QUESTION-{i}?", steps=steps, answer=f"ANSWER-{i}")


def test_smollm2_tokenizer_trains_only_assistant_tokens():
    from agentrag.train.model import load_tokenizer
    from agentrag.train.sft import tokenize_sft

    tokenizer = load_tokenizer("embedded")
    records = to_trl_records([_traj(i) for i in range(2)], "SYSTEM-PROMPT: search then answer.", TOOLS)
    for rec in records:
        toks = assistant_mask(rec, tokenizer)
        trained = tokenizer.decode([t for t, m in zip(toks.input_ids, toks.assistant_mask) if m])
        masked = tokenizer.decode([t for t, m in zip(toks.input_ids, toks.assistant_mask) if not m])
        assert "OBSERVATION" not in trained and "USER-QUESTION" not in trained and "SYSTEM-PROMPT" not in trained
        assert "THOUGHT" in trained and "<tool_call>" in trained and "ANSWER" in trained
        assert "OBSERVATION" in masked and "<tool_response>" in masked
        assert trained.count("<|im_end|>") == sum(m["role"] == "assistant" for m in rec["messages"])
    rows = tokenize_sft(records, tokenizer, max_length=4096)
    assert all(sum(label != -100 for label in r["labels"]) > 0 for r in rows)
