"""An ``--llm`` reference (DESIGN §5) read once into a typed :class:`LLMRef`, which everything
that asks about a reference reads: the input checks (:meth:`LLMRef.check`), the endpoint
pre-flight (:mod:`agentrag.llm.preflight`), the defaults that depend on the backend
(:attr:`LLMRef.is_embedded`), the default items in flight (:attr:`LLMRef.is_remote`) and the
comparison of a rerun's config (:meth:`LLMRef.identity`). The one parser is
:func:`llm_config_from_ref`; nothing else looks at a reference's text."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrag.config import load_config
from agentrag.errors import UserError
from agentrag.llm.config import LLMConfig

#: the config keys that hold an LLM reference (a command's config, or an agent's: ``agent_config``)
LLM_KEYS = ("llm", "judge", "teacher", "tagger", "executor_llm")

#: settings of an LLM reference that say where and how fast it is reached, not what it answers: an
#: endpoint that moved (a restarted server, a new key) does not make another configuration
TRANSPORT_KEYS = ("base_url", "api_key", "timeout", "max_retries", "backoff_initial", "backoff_max", "concurrency",
                  "n_threads", "n_threads_batch", "extra_buffer_types", "cache")


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


@dataclass(frozen=True)
class LLMRef:
    """A reference as given (``text``) and the backend settings it names (``config``)."""

    text: str
    config: LLMConfig

    @property
    def backend(self) -> str:
        return self.config.backend

    @property
    def is_remote(self) -> bool:
        """An OpenAI-compatible endpoint (many requests in flight pay off)."""
        return self.config.backend == "openai"

    @property
    def is_embedded(self) -> bool:
        """The embedded model on llama.cpp (CPU budgets apply)."""
        return self.config.backend == "embedded"

    @property
    def endpoint(self) -> str:
        """The base URL of a remote reference (its own, else ``$OPENAI_BASE_URL``); "" when it
        names none (the hosted default) or is not remote."""
        if not self.is_remote:
            return ""
        return (self.config.base_url or os.environ.get("OPENAI_BASE_URL") or "").rstrip("/")

    def check(self) -> None:
        """What can be checked without building the backend: an embedded model file exists, a
        local checkpoint is complete."""
        if self.is_embedded:
            from agentrag.paths import embedded_gguf

            path = Path(self.config.model_path) if self.config.model_path else embedded_gguf()
            if not path.is_file():
                raise UserError(f"--llm {self.text!r}: model_path {str(path)!r} is not a GGUF file")
        if self.backend == "hf":
            from agentrag.llm.hf import check_checkpoint

            check_checkpoint(self.config.model_path or "")

    def identity(self) -> str:
        """What the reference answers with (backend, model, sampling), without its endpoint."""
        dump = self.config.model_dump(exclude=set(TRANSPORT_KEYS))
        return " ".join(f"{k}={v}" for k, v in dump.items() if v is not None)


def parse_llm_ref(ref: str | LLMRef, **overrides: Any) -> LLMRef:
    """``ref`` read into an :class:`LLMRef` (a UserError naming it when it is not understood)."""
    if isinstance(ref, LLMRef) and not overrides:
        return ref
    text = ref.text if isinstance(ref, LLMRef) else ref
    return LLMRef(text, llm_config_from_ref(text, **overrides))


def config_llm_refs(cfg: Any) -> Iterator[tuple[str, str]]:
    """``(key, reference)`` of every LLM reference a command's config names (:data:`LLM_KEYS`, and
    those of its ``agent_config``), each distinct reference once."""
    seen: set[str] = set()
    agent_cfg = getattr(cfg, "agent_config", None)
    pairs = [(k, getattr(cfg, k, None)) for k in LLM_KEYS]
    if isinstance(agent_cfg, Mapping):
        pairs += [(f"agent_config.{k}", agent_cfg.get(k)) for k in LLM_KEYS]
    for key, ref in pairs:
        if isinstance(ref, str) and ref and ref not in seen:
            seen.add(ref)
            yield key, ref


__all__ = ["LLMRef", "parse_llm_ref", "llm_config_from_ref", "REF_HELP", "config_llm_refs", "LLM_KEYS", "TRANSPORT_KEYS"]
