"""LLM backends: the protocol, the OpenAI-compatible client, the embedded llama.cpp model, a local
transformers checkpoint (``hf:PATH``), the cache.

Backends are imported lazily, so ``import agentrag.llm`` pulls in neither ``openai`` nor
``llama_cpp``.
"""

from __future__ import annotations

import importlib
from typing import Any

from agentrag.llm.base import LLM, Completion
from agentrag.llm.cache import CachedLLM, ResponseCache
from agentrag.llm.config import LLMConfig, UsageMeter
from agentrag.llm.parsing import parse_json_output, parse_text_tool_calls
from agentrag.llm.resolve import resolve_llm
from agentrag.llm.usage import llm_usage

_LAZY = {"OpenAIBackend": "agentrag.llm.openai_backend", "EmbeddedLLM": "agentrag.llm.embedded",
         "HFLLM": "agentrag.llm.hf", "AdaptiveLimit": "agentrag.llm.adaptive",
         "link_request_limits": "agentrag.llm.adaptive", "default_items_in_flight": "agentrag.llm.adaptive"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentrag.llm' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = ["LLM", "Completion", "resolve_llm", "llm_usage", "OpenAIBackend", "EmbeddedLLM", "HFLLM", "CachedLLM", "ResponseCache",
           "LLMConfig", "UsageMeter", "parse_json_output", "parse_text_tool_calls",
           "AdaptiveLimit", "link_request_limits", "default_items_in_flight"]
