"""GGUF export of a trained checkpoint and the embedded backend's chat-template path, on a tiny randomly
initialised Llama with SmolLM2's tokenizer built here (no download, no training)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agentrag.errors import UserError
from agentrag.records import Message, ToolCall

pytestmark = [pytest.mark.slow, pytest.mark.integration]

TOOLS = [{"type": "function", "function": {"name": "dense_search", "description": "Search <docs> & more.",
                                           "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                                                          "required": ["query"]}}}]
CONVERSATION = [
    Message(role="system", content="Answer with the search tool."),
    Message(role="user", content="Who directed Amélie? Use <answer></answer> & be brief."),
    Message(role="assistant", content="Searching.",
            tool_calls=[ToolCall(id="c0", name="dense_search", arguments={"query": "Amélie director <film>"})]),
    Message(role="tool", content="Doc 1 (Title: Amélie) Directed by Jean-Pierre Jeunet.", tool_call_id="c0",
            name="dense_search"),
]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer Llama (grouped-query attention, tied embeddings) with SmolLM2's tokenizer and the training
    chat template, saved as `agentrag train` saves a checkpoint."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from agentrag.export.masking import training_chat_template
    from agentrag.train.model import load_tokenizer

    tok = load_tokenizer("embedded")
    tok.chat_template = training_chat_template()
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                      rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True, initializer_range=0.2,
                      bos_token_id=1, eos_token_id=2, pad_token_id=2)
    out = tmp_path_factory.mktemp("gguf") / "checkpoint"
    LlamaForCausalLM(cfg).save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out


def _hf_logits(ckpt: Path, ids: list[int]) -> np.ndarray:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(ckpt), dtype=torch.float32).eval()
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0, -1].numpy()


def _gguf_logits(path: Path, ids: list[int]) -> np.ndarray:
    from llama_cpp import Llama

    llama = Llama(model_path=str(path), n_ctx=512, n_threads=1, verbose=False, logits_all=True)
    try:
        llama.eval(ids)
        return np.array(llama.scores[llama.n_tokens - 1])
    finally:
        llama.close()


@pytest.mark.parametrize("quant,tol", [("f16", 0.02), ("q8_0", 0.06)])
def test_written_gguf_computes_the_checkpoints_logits(ckpt: Path, tmp_path: Path, quant: str, tol: float) -> None:
    from transformers import AutoTokenizer

    from agentrag.train.gguf import gguf_info, write_gguf

    path = write_gguf(ckpt, tmp_path / f"m.{quant}.gguf", quant)
    info = gguf_info(path)
    assert info["architecture"] == "llama" and info["prompt_format"] == "chat_template_tools"
    assert info["types"] == sorted({"F32", quant.upper()})
    tok = AutoTokenizer.from_pretrained(str(ckpt))
    ids = tok("The tower stands in Paris, and the river runs through the city of lights.")["input_ids"]
    hf, gg = _hf_logits(ckpt, ids), _gguf_logits(path, ids)
    spread = float(hf.max() - hf.min())
    assert spread > 1.0  # the logits are far from uniform, so a wrong RoPE layout would show
    assert float(np.abs(hf - gg).max()) < tol * spread
    assert list(np.argsort(-hf)[:5]) == list(np.argsort(-gg)[:5])


def _reference_tokenizer_tokens() -> list[str]:
    import gguf

    from agentrag.paths import embedded_gguf

    return list(gguf.GGUFReader(str(embedded_gguf())).fields["tokenizer.ggml.tokens"].contents())


def test_write_refuses_an_existing_file_and_a_foreign_tokenizer(ckpt: Path, tmp_path: Path) -> None:
    from agentrag.train.gguf import write_gguf

    taken = tmp_path / "taken.gguf"
    taken.write_text("mine")
    with pytest.raises(UserError, match="never written over"):
        write_gguf(ckpt, taken)
    assert taken.read_text() == "mine"
    with pytest.raises(UserError, match="q4"):
        write_gguf(ckpt, tmp_path / "x.gguf", "q4")
    with pytest.raises(UserError, match="no config.json"):
        write_gguf(tmp_path, tmp_path / "y.gguf")
    from agentrag.paths import embedded_gguf
    from agentrag.train.gguf import _reference_tokenizer

    tokens = _reference_tokenizer_tokens()
    assert _reference_tokenizer(embedded_gguf(), tokens)["tokenizer.ggml.pre"] == "smollm"
    with pytest.raises(UserError, match="tokenizer"):
        _reference_tokenizer(embedded_gguf(), tokens[:100] + ["zzzq"] + tokens[101:])
    assert not list(tmp_path.glob("*.gguf.tmp*"))


def test_embedded_backend_on_the_written_gguf(ckpt: Path, tmp_path: Path) -> None:
    from agentrag.llm import resolve_llm
    from agentrag.llm.hf import HFLLM
    from agentrag.train.gguf import write_gguf

    path = write_gguf(ckpt, tmp_path / "m.f16.gguf", "f16")
    llm = resolve_llm(f"embedded:{path}", n_ctx=512)
    assert llm.prompt_format == "chat_template_tools"  # type: ignore[attr-defined]
    msgs = CONVERSATION[:2]
    a = llm.chat(msgs, temperature=0.0, max_tokens=12)[0]
    assert a.usage.completion_tokens > 0 and a.usage.prompt_tokens > 20
    assert llm.chat(msgs, temperature=0.0, max_tokens=12)[0].text == a.text  # greedy is deterministic
    # the prompt has exactly the tokens the hf: backend sends
    hf = HFLLM(ckpt, n_ctx=512)
    h = hf.chat(msgs, temperature=0.0, max_tokens=12)[0]
    assert h.usage.prompt_tokens == a.usage.prompt_tokens
    # with tools the grammar allows free text or one well-formed call, never a broken one
    t = llm.chat(CONVERSATION, tools=TOOLS, temperature=0.0, max_tokens=24)[0]
    assert "<tool_call>" not in (t.text or "")
    for c in t.tool_calls:
        assert c.name == "dense_search" and isinstance(c.arguments.get("query"), str)


def test_sft_checkpoint_as_gguf_agrees_with_hf(tmp_path: Path) -> None:
    """One SFT step on the shared SmolLM2 with --gguf f16; the GGUF's greedy replies equal hf:'s."""
    from typer.testing import CliRunner

    from agentrag.cli.main import app
    from agentrag.llm import resolve_llm
    from agentrag.records import Step, Trajectory, write_jsonl

    trajs = [Trajectory(id=f"t{i}", question=f"Which city hosts landmark number {i}?", answer="Paris", steps=[
        Step(thought="I should search.", action=ToolCall(id="c0", name="dense_search",
                                                         arguments={"query": f"landmark {i} location"}),
             observation=f"Doc 1 (Title: Landmark {i}) Landmark {i} stands in Paris, France."),
        Step(thought="It is in Paris. <answer>Paris</answer>")]) for i in range(2)]
    write_jsonl(tmp_path / "trajs.jsonl", trajs)
    (tmp_path / "tools.json").write_text(json.dumps(TOOLS))
    runner = CliRunner()
    res = runner.invoke(app, ["export", "sft", "--trajectories", str(tmp_path / "trajs.jsonl"), "--out",
                              str(tmp_path / "export"), "--tools", str(tmp_path / "tools.json")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["train", "sft", "--data", str(tmp_path / "export" / "trl_sft.jsonl"), "--out",
                              str(tmp_path / "run"), "--max-steps", "1", "--gguf", "f16",
                              "--set", "max_length=256", "--set", "learning_rate=1e-4", "--set", "batch_size=1"])
    assert res.exit_code == 0, res.output
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    path = tmp_path / "run" / "checkpoint.f16.gguf"
    assert metrics["gguf"] == str(path) and metrics["gguf_quant"] == "f16" and path.is_file()
    hf, gg = resolve_llm(f"hf:{tmp_path / 'run' / 'checkpoint'}"), resolve_llm(f"embedded:{path}", n_ctx=1024)
    prompts = [CONVERSATION[:2], CONVERSATION,
               [Message(role="user", content="List three facts about the planet Mars.")],
               [Message(role="user", content="Describe how a bicycle works in a few sentences.")]]
    agree = 0
    for msgs in prompts:
        a = hf.chat(msgs, tools=TOOLS, temperature=0.0, max_tokens=16)[0]
        b = gg.chat(msgs, tools=TOOLS, temperature=0.0, max_tokens=16)[0]
        assert a.usage.prompt_tokens == b.usage.prompt_tokens  # the same prompt tokens
        agree += (a.text, [(c.name, c.arguments) for c in a.tool_calls]) == (
            b.text, [(c.name, c.arguments) for c in b.tool_calls])
    assert agree >= 3, f"{agree} of {len(prompts)} greedy replies agree"
