"""``hf:PATH`` backend on a tiny randomly initialised checkpoint built here (no download)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentrag.errors import ContextLimitError, UserError
from agentrag.llm import CachedLLM, resolve_llm
from agentrag.llm.hf import HFLLM, render_messages
from agentrag.llm.resolve import check_llm_ref, llm_config_from_ref
from agentrag.records import Message, ToolCall

SPECIAL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from agentrag.export.masking import training_chat_template

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    corpus = ["system user assistant tool dense_search query answer <tool_call> </tool_call> {\"name\": \"x\"}"] * 5
    raw.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIAL,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tok.chat_template = training_chat_template()
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    out = tmp_path_factory.mktemp("hf") / "checkpoint"
    LlamaForCausalLM(cfg).save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out


TOOLS = [{"type": "function", "function": {"name": "dense_search", "description": "search",
                                           "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                                                          "required": ["query"]}}}]
MSGS = [Message(role="system", content="Answer."), Message(role="user", content="Who?")]


def test_ref_parses_and_checks_the_directory(ckpt: Path, tmp_path: Path) -> None:
    cfg = llm_config_from_ref(f"hf:{ckpt}", temperature=0.5)
    assert cfg.backend == "hf" and cfg.model_path == str(ckpt) and cfg.temperature == 0.5
    assert check_llm_ref(f"hf:{ckpt}").backend == "hf"
    with pytest.raises(UserError, match="checkpoint"):
        check_llm_ref(f"hf:{tmp_path}")
    with pytest.raises(UserError, match="missing checkpoint"):
        llm_config_from_ref("hf:")


def test_generates_with_usage_greedy_determinism_and_cache(ckpt: Path, tmp_path: Path) -> None:
    llm = resolve_llm(f"hf:{ckpt}", cache=tmp_path / "c.sqlite")
    assert isinstance(llm, CachedLLM) and isinstance(llm.inner, HFLLM)
    a = llm.chat(MSGS, tools=TOOLS, max_tokens=6, temperature=0)[0]
    assert a.usage.prompt_tokens > 10 and 1 <= a.usage.completion_tokens <= 6
    assert a.finish_reason in ("stop", "length", "tool_calls")
    b = llm.chat(MSGS, tools=TOOLS, max_tokens=6, temperature=0)[0]
    assert b == a and llm.inner_calls == 1 and llm.hits == 1
    direct = HFLLM(ckpt)
    c, d = direct.chat(MSGS, max_tokens=6, temperature=0, n=2)
    assert c.text == d.text  # greedy: the same
    assert direct.meter.snapshot()["calls"] == 2
    s1 = direct.chat(MSGS, max_tokens=6, temperature=1.0, seed=3)[0]
    s2 = direct.chat(MSGS, max_tokens=6, temperature=1.0, seed=3)[0]
    assert s1.text == s2.text  # seeded sampling is reproducible
    with pytest.raises(UserError, match="unknown sampling"):
        direct.chat(MSGS, max_tokens=2, beam=3)


def test_context_limit_is_data(ckpt: Path) -> None:
    llm = HFLLM(ckpt, config=llm_config_from_ref(f"hf:{ckpt}", n_ctx=256))
    with pytest.raises(ContextLimitError):
        llm.chat(MSGS, tools=TOOLS, max_tokens=400)


def test_tool_calls_parsed_like_text_backends(ckpt: Path) -> None:
    llm = HFLLM(ckpt)
    call = llm._completion('<tool_call>\n{"name": "dense_search", "arguments": {"query": "Ada"}}\n</tool_call>',
                           10, 5, True, None, TOOLS, 0.1)
    assert call.finish_reason == "tool_calls" and call.tool_calls[0].arguments == {"query": "Ada"}
    broken = llm._completion('<tool_call>{"name": "dense_search", "arguments": {"query"', 10, 5, False, None, TOOLS, 0.1)
    assert not broken.tool_calls and broken.finish_reason == "length" and broken.text.startswith("<tool_call>")
    answer = llm._completion("<answer>Vienna</answer> tail", 10, 5, True, [" tail"], TOOLS, 0.1)
    assert answer.text == "<answer>Vienna</answer>" and answer.finish_reason == "stop"


def test_prompt_is_a_prefix_of_the_trained_rendering(ckpt: Path) -> None:
    """What the agent sends at turn k renders exactly as the first k turns of an SFT record."""
    from transformers import AutoTokenizer

    from agentrag.export.masking import render
    from agentrag.export.sft import message_dict

    tok = AutoTokenizer.from_pretrained(str(ckpt))
    conv = [*MSGS, Message(role="assistant", content="", tool_calls=[ToolCall(id="call_0", name="dense_search",
                                                                              arguments={"query": "Ada"})]),
            Message(role="tool", content="Doc 1 (Title: Ada) Ada is here.", tool_call_id="call_0", name="dense_search"),
            Message(role="assistant", content="<answer>Ada</answer>")]
    record = {"messages": [message_dict(m) for m in conv], "tools": TOOLS}
    full = render(json.loads(json.dumps(record)), tok)
    prompt = tok.apply_chat_template(render_messages(conv[:4], None), tools=TOOLS, add_generation_prompt=True,
                                     tokenize=False)
    assert full.startswith(prompt) and full[len(prompt):].startswith("<answer>Ada</answer>")
    from agentrag.llm.hf import message_dict as hf_message_dict

    assert [hf_message_dict(m) for m in conv] == record["messages"]


def test_prefix_cache_reuses_earlier_prompts_and_keeps_greedy_outputs(ckpt: Path) -> None:
    """Turn k's prompt extends turn k-1's: only the new tokens are computed, and the greedy output is
    the cold-start one (also after an unrelated prompt in between, and for a shorter prompt)."""
    from agentrag.llm.hf import PrefixCache, _generate, load_checkpoint

    model, tok, _ = load_checkpoint(ckpt)
    base = tok("system user assistant tool dense_search query answer")["input_ids"]
    turns = [base, base + tok(" tool answer query")["input_ids"], base + tok(" tool answer query user")["input_ids"]]
    other = tok("answer answer query system")["input_ids"]
    greedy = {"temperature": 0}
    cold = [_generate(model, tok, ids, 8, greedy, "cpu") for ids in (*turns, other, base[:3])]
    pool = PrefixCache(size=2)
    warm = []
    reused = []
    for ids in (*turns, other, base[:3]):
        cache, n = pool.take(ids)
        reused.append(n)
        if cache is not None:
            pool.put(ids[:n], cache)  # give it back: _generate takes it again
        warm.append(_generate(model, tok, ids, 8, greedy, "cpu", pool))
    assert warm == cold
    assert reused[0] == 0 and reused[1] == len(base) and reused[2] == len(turns[1]) and reused[3] == 0
    assert reused[4] == 2  # a shorter prompt: the cache cut to its first tokens (one left to compute)
    assert len(pool.entries) == 2
