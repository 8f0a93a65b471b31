"""Loading a trainable causal LM and its tokenizer: the embedded SmolLM2 GGUF or a HF directory.

transformers reads the GGUF and dequantizes it, but flags the model as quantized, and a
quantized model cannot be fine-tuned. So the model is rebuilt with ``from_config`` from the same
config minus ``quantization_config`` and the dequantized weights are loaded into it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from agentrag._extras import quiet_loading, require
from agentrag.errors import UserError
from agentrag.paths import cache_root, embedded_gguf

log = logging.getLogger(__name__)

EMBEDDED = "embedded"


def _require_train_extra() -> None:
    for module in ("torch", "transformers"):
        require(module, "train", purpose="loading a model for training")


def _source(model: str) -> tuple[str, dict[str, Any]]:
    """(directory, extra from_pretrained kwargs) for a model reference."""
    if model == EMBEDDED:
        gguf = embedded_gguf()
        return str(gguf.parent), {"gguf_file": gguf.name}
    p = Path(model)
    if p.is_file() and p.suffix == ".gguf":
        return str(p.parent), {"gguf_file": p.name}
    if p.is_dir():
        return str(p), {}
    raise UserError(f"--model {model!r}: expected 'embedded', a .gguf file or a Hugging Face model directory")


def _needs_gguf(kwargs: dict[str, Any]) -> None:
    if "gguf_file" in kwargs:
        require("gguf", "train", purpose="loading a GGUF model for training")


def check_model(model: str) -> None:
    """Validate a model reference before anything is written (UserError naming it)."""
    _needs_gguf(_source(model)[1])


def _cache_dir(gguf: Path, kind: str) -> Path:
    """Where what is converted from a GGUF file is kept (``kind``: tokenizers or models)."""
    root = cache_root()
    st = gguf.stat()
    key = hashlib.sha256(f"{gguf.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]
    return root / kind / f"{gguf.stem}-{key}"


def load_tokenizer(model: str = EMBEDDED) -> Any:
    """The tokenizer of ``model`` (``embedded``, a .gguf file or a HF directory); offline only.

    A tokenizer converted from a GGUF file is cached under ``$AGENTRAG_CACHE`` (default
    ``~/.cache/agentrag``) and read from there next time.
    """
    _require_train_extra()
    from transformers import AutoTokenizer

    src, kwargs = _source(model)
    cache = _cache_dir(Path(src) / kwargs["gguf_file"], "tokenizers") if "gguf_file" in kwargs else None
    if cache is not None and (cache / "tokenizer_config.json").exists():
        tok = AutoTokenizer.from_pretrained(str(cache), local_files_only=True)
    else:
        _needs_gguf(kwargs)
        tok = AutoTokenizer.from_pretrained(src, local_files_only=True, **kwargs)
        if cache is not None:
            try:
                tok.save_pretrained(str(cache))
            except OSError as exc:
                log.warning("could not cache the tokenizer in %s: %s", cache, exc)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def load_trainable_model(model: str = EMBEDDED) -> Any:
    """A float32 causal LM that can be fine-tuned (GGUF weights dequantized and rebuilt).

    The rebuilt model is cached as safetensors next to the tokenizer (dequantizing takes tens of
    seconds on a small CPU; reading the cache, one or two).
    """
    _require_train_extra()
    import torch
    from transformers import AutoModelForCausalLM

    src, kwargs = _source(model)
    cache = _cache_dir(Path(src) / kwargs["gguf_file"], "models") if "gguf_file" in kwargs else None
    if cache is not None and (cache / "config.json").exists():
        with quiet_loading():
            return AutoModelForCausalLM.from_pretrained(str(cache), local_files_only=True, dtype=torch.float32)
    with quiet_loading():
        rebuilt = _dequantized(src, kwargs, model)
    if cache is not None:
        tmp = cache.with_name(cache.name + f".tmp{os.getpid()}")
        try:
            rebuilt.save_pretrained(str(tmp))
            os.replace(tmp, cache)
        except OSError as exc:  # e.g. another process cached it first
            log.warning("could not cache the dequantized model in %s: %s", cache, exc)
            shutil.rmtree(tmp, ignore_errors=True)
        if (cache / "config.json").exists():
            # trainers that build a reference model (DPO) reload it from the config's
            # name_or_path; the GGUF's package folder is no Hugging Face model directory
            rebuilt.config._name_or_path = str(cache)
            rebuilt.name_or_path = str(cache)
    return rebuilt


def _dequantized(src: str, kwargs: dict[str, Any], model: str) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    _needs_gguf(kwargs)
    loaded = AutoModelForCausalLM.from_pretrained(src, local_files_only=True, dtype=torch.float32, **kwargs)
    if "gguf_file" not in kwargs and getattr(loaded.config, "quantization_config", None) is None:
        return loaded
    cfg = loaded.config.to_dict()
    cfg.pop("quantization_config", None)
    config = type(loaded.config).from_dict(cfg)
    rebuilt = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    result = rebuilt.load_state_dict(loaded.state_dict(), strict=False)
    if result.missing_keys:
        raise RuntimeError(f"rebuilding {model!r} lost weights: {result.missing_keys[:5]}")
    rebuilt.tie_weights()
    log.info("loaded %s (%.1fM parameters, dequantized and rebuilt for training)",
             model, sum(p.numel() for p in rebuilt.parameters()) / 1e6)
    del loaded
    return rebuilt


__all__ = ["EMBEDDED", "load_tokenizer", "load_trainable_model"]
