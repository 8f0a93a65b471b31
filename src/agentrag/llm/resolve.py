"""``resolve_llm``: turn an ``--llm`` reference into a backend (DESIGN §5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrag.llm.base import LLM
from agentrag.llm.cache import CachedLLM
from agentrag.llm.config import LLMConfig
from agentrag.llm.reference import REF_HELP, llm_config_from_ref, parse_llm_ref


def check_llm_ref(ref: str, **overrides: Any) -> LLMConfig:
    """Validate a reference without building the backend (so a command can check its inputs before
    it writes anything): the reference parses and an embedded model file exists
    (:meth:`agentrag.llm.reference.LLMRef.check`)."""
    parsed = parse_llm_ref(ref, **overrides)
    parsed.check()
    return parsed.config


def build_llm(config: LLMConfig) -> LLM:
    """A backend instance for ``config`` (no cache)."""
    if config.backend == "openai":
        from agentrag.llm.openai_backend import OpenAIBackend

        return OpenAIBackend(config.model, config=config)
    if config.backend == "hf":
        from agentrag.llm.hf import HFLLM

        return HFLLM(config=config)
    from agentrag.llm.embedded import EmbeddedLLM

    return EmbeddedLLM(config=config)


def resolve_llm(ref: str = "embedded", *, cache: str | Path | None = None, **overrides: Any) -> LLM:
    """The LLM named by ``ref``: ``embedded`` | ``embedded:PATH.gguf`` | ``openai:MODEL`` | ``openai:MODEL@URL`` | ``hf:PATH`` | YAML path.

    ``overrides`` are :class:`LLMConfig` keys (e.g. ``temperature=0.7``, ``timeout=30``).
    With ``cache`` (a sqlite path) responses are cached, unless the config sets ``cache: false``.
    """
    config = llm_config_from_ref(ref, **overrides)
    llm = build_llm(config)
    if cache is not None and config.cache:
        return CachedLLM(llm, cache)
    return llm


__all__ = ["resolve_llm", "llm_config_from_ref", "check_llm_ref", "build_llm", "REF_HELP"]
