"""The embedded backend's chat-template path for trained GGUFs: prompt rendering equal to transformers',
the tool-call grammar, and the check that lets a well-formed free reply skip the grammar."""

from __future__ import annotations

import pytest

from agentrag.errors import UserError
from agentrag.llm.gguf_chat import render_prompt, tool_call_grammar, well_formed_reply
from agentrag.llm.hf import render_messages
from agentrag.llm.resolve import check_llm_ref, llm_config_from_ref
from agentrag.records import Message, ToolCall

TOOLS = [{"type": "function", "function": {
    "name": "dense_search", "description": "Search <docs> & more.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string", "minLength": 1, "maxLength": 20},
                                                    "top_k": {"type": "integer", "minimum": 1, "maximum": 20}},
                   "required": ["query"]}}}]
CONVERSATION = [
    Message(role="system", content="Answer with the search tool."),
    Message(role="user", content="Who directed Amélie? Use <answer></answer> & be brief."),
    Message(role="assistant", content="Searching.",
            tool_calls=[ToolCall(id="c0", name="dense_search", arguments={"query": "Amélie director <film>"})]),
    Message(role="tool", content="Doc 1 (Title: Amélie) Directed by Jean-Pierre Jeunet.", tool_call_id="c0",
            name="dense_search"),
]


def test_prompt_equals_transformers_rendering_of_the_training_template() -> None:
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    from agentrag.export.masking import training_chat_template
    from agentrag.train.gguf import strip_generation_markers

    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()), eos_token="<|im_end|>")
    tok.chat_template = training_chat_template()
    template = strip_generation_markers(tok.chat_template)
    assert "{%- generation %}" not in template and "endgeneration" not in template
    rendered = render_messages(CONVERSATION, None)
    want = tok.apply_chat_template(rendered, tools=TOOLS, add_generation_prompt=True, tokenize=False)
    got = render_prompt(template, rendered, TOOLS)
    assert got == want and "Amélie" in got and "<docs> & more" in got  # tojson escapes no HTML
    assert render_prompt(template, rendered[:2], None) == tok.apply_chat_template(
        rendered[:2], add_generation_prompt=True, tokenize=False)


@pytest.mark.parametrize("text,ok", [
    ("Paris is the capital. <answer>Paris</answer>", True),
    ('Found: X.\n<tool_call>\n{"name": "dense_search", "arguments": {"query": "who"}}\n</tool_call>', True),
    ('<tool_call>\n{"name": "dense_search", "arguments": {"query": "who", "top_k": 3}}\n</tool_call>', True),
    ('<tool_call>\n{"name": "dense_search", "arguments": {"query": "who"}}', False),  # cut off
    ('<tool_call>\n{"name": "dense_search", "arguments": {"query": "who"}\n</tool_call>', False),  # broken JSON
    ('<tool_call>\n{"name": "web", "arguments": {"query": "who"}}\n</tool_call>', False),  # unknown tool
    ('<tool_call>\n{"name": "dense_search", "arguments": {}}\n</tool_call>', False),  # required missing
    ('<tool_call>\n{"name": "dense_search", "arguments": {"query": ""}}\n</tool_call>', False),  # minLength
    ('<tool_call>\n{"name": "dense_search", "arguments": {"query": "q", "top_k": 99}}\n</tool_call>', False),
    ('<tool_call>\n{"name": "dense_search", "arguments": {"query": "q", "k": 1}}\n</tool_call>', False),
    ('<tool_call>\n{"name": "dense_search", "arguments": {"query": "q"}}\n</tool_call> then more', False),
    ('<tool_call>\n{"name": "dense_search", "arguments": {"query": "a"}}\n</tool_call>\n'
     '<tool_call>\n{"name": "dense_search", "arguments": {"query": "b"}}\n</tool_call>', False),  # two calls
    ("stray </tool_call>", False),
])
def test_well_formed_reply_is_the_grammars_language(text: str, ok: bool) -> None:
    assert well_formed_reply(text, TOOLS) is ok


def test_grammar_compiles_for_llama_cpp() -> None:
    from llama_cpp.llama_grammar import LlamaGrammar

    gbnf = tool_call_grammar(TOOLS)
    assert gbnf.startswith("root ::= text") and "call ::=" in gbnf and '"\\"dense_search\\""' in gbnf
    LlamaGrammar.from_string(gbnf, verbose=False)


def test_embedded_path_reference(tmp_path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    cfg = llm_config_from_ref(f"embedded:{model}", temperature=0.0)
    assert cfg.backend == "embedded" and cfg.model_path == str(model) and cfg.temperature == 0.0
    assert check_llm_ref(f"embedded:{model}").model_path == str(model)
    with pytest.raises(UserError, match="not a GGUF file"):
        check_llm_ref(f"embedded:{tmp_path / 'missing.gguf'}")
    with pytest.raises(UserError, match="missing GGUF"):
        llm_config_from_ref("embedded:")
