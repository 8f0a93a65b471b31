"""``hf:PATH`` backend: a local Hugging Face checkpoint (e.g. the one ``agentrag train sft`` writes
into ``OUT/checkpoint``) generating with transformers on CPU (or a GPU when torch sees one).

The prompt is rendered with the checkpoint's own chat template (``agentrag train`` saves TRL's
ChatML training template with the tokenizer), from the messages in exactly the form the SFT
export trains on (:func:`agentrag.export.sft.message_dict`: assistant ``tool_calls``, ``role:
tool`` observations, the tool schemas in ``tools``), so the trained model sees at evaluation the
format it learnt. Tool calls are parsed from the text like the OpenAI backend does for servers
without a tool parser (``<tool_call>{...}</tool_call>`` or a bare JSON call,
:func:`agentrag.llm.parsing.parse_text_tool_calls`); nothing constrains decoding, so a model that
writes a broken call produces a parse error the agent counts (unlike the embedded backend's
grammar). JSON response formats are asked for in the system prompt.

The model is loaded once per process (keyed by path and device) and generation is serialized by
a lock, so one instance is shared by threads. An agent's prompt at turn k extends its prompt at
turn k-1, so the attention cache of the last few prompts is kept (:class:`PrefixCache`) and only
the tokens after the longest shared prefix are computed; greedy outputs are those of a cold
start. Sampling: ``temperature`` (0 or None = greedy),
``top_p``, ``max_tokens``, ``stop`` (the text is cut at the first stop string), ``seed``
(``seed + i`` for sample ``i``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

from agentrag._extras import quiet_loading, require
from agentrag.errors import ContextLimitError, UserError
from agentrag.llm.base import Completion
from agentrag.llm.config import SAMPLING_KEYS, LLMConfig, UsageMeter
from agentrag.llm.parsing import parse_text_tool_calls, schema_of
from agentrag.protocol import neutralize_messages
from agentrag.records import Message, ToolCall, Usage

log = logging.getLogger(__name__)

_MODELS: dict[tuple[str, str], tuple[Any, Any, threading.Lock]] = {}
_PREFIXES: dict[tuple[str, str], PrefixCache] = {}
_MODELS_LOCK = threading.Lock()


def check_checkpoint(path: str | Path) -> Path:
    """A checkpoint directory with ``config.json`` (UserError naming it otherwise)."""
    p = Path(path)
    if not (p / "config.json").is_file():
        raise UserError(f"--llm hf:{path}: {str(p)!r} is not a Hugging Face checkpoint directory (no config.json); "
                        "pass e.g. the checkpoint/ folder `agentrag train sft` writes")
    return p


def load_checkpoint(path: Path, device: str = "cpu") -> tuple[Any, Any, threading.Lock]:
    """The process-wide (model, tokenizer, lock) of a checkpoint directory."""
    key = (str(path.resolve()), device)
    with _MODELS_LOCK:
        if key not in _MODELS:
            for module in ("torch", "transformers"):
                require(module, "train", purpose="the hf: LLM backend")
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            if not tok.chat_template:
                raise UserError(f"--llm hf:{path}: the tokenizer has no chat template; save one with the "
                                "checkpoint (`agentrag train sft` saves TRL's ChatML training template)")
            with quiet_loading():
                model = AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True,
                                                             dtype=torch.float32)
            model = model.to(device).eval()  # type: ignore[arg-type]
            log.info("loaded %s on %s (%.1fM parameters)", path, device,
                     sum(p.numel() for p in model.parameters()) / 1e6)
            _MODELS[key] = (model, tok, threading.Lock())
        return _MODELS[key]


def message_dict(m: Message) -> dict[str, Any]:
    """A message as the SFT export writes it (:func:`agentrag.export.sft.message_dict`: tool-call
    arguments as JSON objects, ``tool_call_id``/``name`` on tool messages); the export lives in a
    higher layer, and ``tests/unit/test_llm_hf.py`` checks both render the same."""
    out: dict[str, Any] = {"role": m.role, "content": m.content if m.content is not None else ""}
    if m.tool_calls:
        out["tool_calls"] = [{"id": tc.id, "type": "function",
                              "function": {"name": tc.name, "arguments": dict(tc.arguments)}} for tc in m.tool_calls]
    if m.role == "tool":
        out["tool_call_id"] = m.tool_call_id or ""
        if m.name:
            out["name"] = m.name
    return out


def render_messages(messages: list[Message], schema: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Messages as the SFT export writes them (plus a JSON instruction for a response format)."""
    out = [message_dict(m) for m in messages]
    if schema:
        note = "Reply with one JSON object matching this schema: " + json.dumps(schema)
        if out and out[0]["role"] == "system":
            out[0] = {**out[0], "content": f"{out[0]['content']}\n\n{note}"}
        else:
            out.insert(0, {"role": "system", "content": note})
    return out


class HFLLM:
    """A local transformers checkpoint behind the :class:`~agentrag.llm.base.LLM` protocol."""

    backend = "hf"
    #: a run puts this backend behind its response cache when a Python caller passes it as an object
    response_cache = True

    def __init__(self, path: str | Path | None = None, *, config: LLMConfig | None = None, device: str | None = None,
                 **settings: Any) -> None:
        cfg = config or LLMConfig(backend="hf", model_path=str(path) if path else None, **settings)
        self.config = cfg
        self.path = check_checkpoint(path or cfg.model_path or "")
        self.model = str(self.path.resolve())  # the cache key tells checkpoints apart
        self.device = device or _default_device()
        self.meter = UsageMeter()

    def __repr__(self) -> str:
        return f"HFLLM(path={str(self.path)!r}, device={self.device!r})"

    def chat(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
             response_format: dict[str, Any] | None = None, n: int = 1, **sampling: Any) -> list[Completion]:
        merged = {**self.config.sampling_defaults(), **{k: v for k, v in sampling.items() if v is not None}}
        unknown = set(merged) - set(SAMPLING_KEYS)
        if unknown:
            raise UserError(f"unknown sampling keyword(s) {sorted(unknown)}; use {', '.join(SAMPLING_KEYS)}")
        model, tok, lock = load_checkpoint(self.path, self.device)
        # control tokens in any content (the generic forms and this tokenizer's own) cannot forge a turn
        special = [t for t in getattr(tok, "all_special_tokens", []) if isinstance(t, str)]
        rendered = render_messages(neutralize_messages(messages, special), schema_of(response_format))
        ids = tok.apply_chat_template(rendered, tools=tools or None, add_generation_prompt=True, tokenize=True,
                                      return_dict=True)["input_ids"]
        ids = list(ids[0]) if ids and isinstance(ids[0], list) else list(ids)
        max_new = int(merged.get("max_tokens") or 512)
        limit = min(self.config.n_ctx, int(getattr(model.config, "max_position_embeddings", self.config.n_ctx)))
        if len(ids) + max_new > limit:
            raise ContextLimitError(f"hf model {self.path.name}: the prompt has {len(ids)} tokens (+ max_tokens "
                                    f"{max_new}), over the maximum context length of {limit} tokens")
        out = []
        for i in range(n):
            s = dict(merged)
            if s.get("seed") is not None:
                s["seed"] = int(s["seed"]) + i
            start = time.perf_counter()
            with lock:
                new, hit_eos = _generate(model, tok, ids, max_new, s, self.device,
                                         _prefix_cache(self.path, self.device))
            latency = time.perf_counter() - start
            out.append(self._completion(tok.decode(new, skip_special_tokens=True), len(ids), len(new),
                                        hit_eos, s.get("stop"), tools, latency))
        return out

    def _completion(self, text: str, n_prompt: int, n_new: int, hit_eos: bool, stop: list[str] | None,
                    tools: list[dict[str, Any]] | None, latency: float) -> Completion:
        finish = "stop" if hit_eos else "length"
        for s in stop or []:
            if s and s in text:
                text, finish = text[: text.index(s)], "stop"
        text = text.strip()
        calls: list[ToolCall] = []
        if tools:
            rest, calls = parse_text_tool_calls(text, tools)
            if calls:
                text, finish = rest or "", "tool_calls"
        comp = Completion(text=text or None, tool_calls=calls, finish_reason=finish,
                          usage=Usage(prompt_tokens=n_prompt, completion_tokens=n_new, calls=1), latency=latency)
        self.meter.record([comp], latency)
        return comp

    async def achat(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
                    response_format: dict[str, Any] | None = None, n: int = 1,
                    **sampling: Any) -> list[Completion]:
        """Async twin of :meth:`chat` (generation runs in a worker thread)."""
        return await asyncio.to_thread(self.chat, messages, tools, response_format, n, **sampling)


class PrefixCache:
    """The attention caches of the last ``size`` prompts of one model (used under its lock)."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self.entries: list[tuple[list[int], Any]] = []  # (prompt ids, cache covering at least them)

    def take(self, ids: list[int]) -> tuple[Any, int]:
        """The cache sharing the longest prefix with ``ids`` (removed from the pool, cut to that
        prefix, at most ``len(ids) - 1`` so one token is left to compute) and its length; (None, 0)."""
        best, best_n = -1, 0
        for i, (prev, _) in enumerate(self.entries):
            n = 0
            for a, b in zip(prev, ids, strict=False):
                if a != b:
                    break
                n += 1
            if n > best_n:
                best, best_n = i, n
        n = min(best_n, len(ids) - 1)
        if best < 0 or n <= 0:
            return None, 0
        _, cache = self.entries.pop(best)
        extra = cache.get_seq_length() - n
        if extra > 0:
            cache.crop(-extra)  # a negative count removes that many tokens (transformers 4 and 5)
        return cache, n

    def put(self, ids: list[int], cache: Any) -> None:
        self.entries.append((list(ids), cache))
        del self.entries[:-self.size]


def _prefix_cache(path: Path, device: str) -> PrefixCache:
    key = (str(path.resolve()), device)
    with _MODELS_LOCK:
        return _PREFIXES.setdefault(key, PrefixCache())


def _default_device() -> str:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _generate(model: Any, tok: Any, ids: list[int], max_new: int, sampling: dict[str, Any],
              device: str, prefixes: PrefixCache | None = None) -> tuple[list[int], bool]:
    """New token ids and whether generation ended on an end-of-turn token (``prefixes``: reuse
    and keep attention caches of earlier prompts)."""
    import torch
    from transformers import DynamicCache

    eos = {t for t in (tok.eos_token_id, tok.convert_tokens_to_ids("<|im_end|>")) if isinstance(t, int) and t >= 0}
    temperature = float(sampling.get("temperature") or 0.0)
    kwargs: dict[str, Any] = {"max_new_tokens": max_new, "eos_token_id": sorted(eos),
                              "pad_token_id": tok.pad_token_id if tok.pad_token_id is not None else min(eos)}
    if temperature > 0:
        kwargs.update(do_sample=True, temperature=temperature, top_p=float(sampling.get("top_p") or 1.0))
        if sampling.get("seed") is not None:
            torch.manual_seed(int(sampling["seed"]))
    else:
        kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
    cache, _ = prefixes.take(ids) if prefixes is not None else (None, 0)
    if prefixes is not None and cache is None:
        cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        x = torch.tensor([ids], device=device)
        if cache is not None:
            kwargs["past_key_values"] = cache
        y = model.generate(x, attention_mask=torch.ones_like(x), **kwargs)[0, len(ids):].tolist()
    if prefixes is not None:
        prefixes.put(ids, cache)
    hit_eos = bool(y) and y[-1] in eos
    if hit_eos:
        y = y[:-1]
    return y, hit_eos


__all__ = ["HFLLM", "PrefixCache", "check_checkpoint", "load_checkpoint", "message_dict", "render_messages"]
