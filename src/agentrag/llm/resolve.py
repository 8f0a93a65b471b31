"""``resolve_llm``: turn an ``--llm`` reference into a backend (DESIGN §5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrag.config import load_config
from agentrag.errors import UserError
from agentrag.llm.base import LLM
from agentrag.llm.cache import CachedLLM
from agentrag.llm.config import LLMConfig

REF_HELP = ("'embedded', 'embedded:PATH.gguf' (any GGUF file on llama.cpp, e.g. the one `agentrag train --gguf` "
            "writes), 'openai:MODEL', 'openai:MODEL@http://host:port/v1', 'hf:PATH' (a local "
            "transformers checkpoint, e.g. the one `agentrag train sft` writes), or a YAML file with backend settings")


def llm_config_from_ref(ref: str, **overrides: Any) -> LLMConfig:
    """The :class:`LLMConfig` a reference names, with ``overrides`` (config keys) applied last."""
    ref = ref.strip()
    base: dict[str, Any]
    if ref == "embedded":
        base = {"backend": "embedded"}
    elif ref.startswith("embedded:"):
        path = ref[len("embedded:"):]
        if not path:
            raise UserError(f"--llm {ref!r}: missing GGUF file; expected {REF_HELP}")
        base = {"backend": "embedded", "model_path": path}
    elif ref.startswith("openai:"):
        spec = ref[len("openai:"):]
        model, sep, url = spec.rpartition("@") if "@http" in spec else (spec, "", "")
        if not model:
            raise UserError(f"--llm {ref!r}: missing model name; expected {REF_HELP}")
        base = {"backend": "openai", "model": model}
        if sep:
            base["base_url"] = url
    elif ref.startswith("hf:"):
        path = ref[len("hf:"):]
        if not path:
            raise UserError(f"--llm {ref!r}: missing checkpoint directory; expected {REF_HELP}")
        base = {"backend": "hf", "model_path": path, "model": Path(path).name or path}
    elif ref.endswith((".yaml", ".yml")) or Path(ref).is_file():
        cfg = load_config(LLMConfig, ref)
        base = cfg.model_dump(exclude_unset=True)
    else:
        raise UserError(f"--llm {ref!r} not understood; expected {REF_HELP}")
    data = {**base, **{k: v for k, v in overrides.items() if v is not None}}
    return load_config(LLMConfig, None, base=data)


def check_llm_ref(ref: str, **overrides: Any) -> LLMConfig:
    """Validate a reference without building the backend (so a command can check its inputs before
    it writes anything): the reference parses and an embedded model file exists."""
    config = llm_config_from_ref(ref, **overrides)
    if config.backend == "embedded":
        from agentrag.paths import embedded_gguf

        path = Path(config.model_path) if config.model_path else embedded_gguf()
        if not path.is_file():
            raise UserError(f"--llm {ref!r}: model_path {str(path)!r} is not a GGUF file")
    if config.backend == "hf":
        from agentrag.llm.hf import check_checkpoint

        check_checkpoint(config.model_path or "")
    return config


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
