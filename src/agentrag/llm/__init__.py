"""LLM backends: the protocol, the OpenAI-compatible client, the embedded llama.cpp model, the cache."""

from agentrag.llm.base import LLM, Completion

__all__ = ["LLM", "Completion"]
