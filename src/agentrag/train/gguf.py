"""Write a trained Llama-architecture checkpoint (e.g. SmolLM2 after ``agentrag train``) as a GGUF
file that llama.cpp runs (``--llm embedded:PATH.gguf``).

The weights come from the checkpoint's safetensors (read with transformers), are renamed to
llama.cpp's tensor names, and the query/key projections are permuted from Hugging Face's
rotate-half layout to llama.cpp's interleaved RoPE layout (what llama.cpp's own
``convert_hf_to_gguf.py`` does for ``LlamaForCausalLM``). Matrices are stored as ``q8_0``
(llama.cpp's 8-bit blocks, quantized by the ``gguf`` package) or ``f16``; norms stay ``f32``.

The tokenizer is copied from a reference GGUF of the same vocabulary (by default the embedded
SmolLM2 GGUF, which carries llama.cpp's pre-tokenizer name ``smollm``): the checkpoint's tokens
must equal it, else a UserError says to use llama.cpp's converter. The chat template is the
checkpoint's (TRL's ChatML training template, its ``{% generation %}`` markers removed), and the
key ``agentrag.prompt_format`` tells the embedded backend to render the prompt with it exactly as
the ``hf:`` backend does (:mod:`agentrag.llm.gguf_chat`).

Nothing is downloaded; the ``gguf`` package is a pinned dependency of the ``train`` extra.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any, Literal

from agentrag._extras import require
from agentrag.errors import UserError
from agentrag.llm.gguf_chat import PROMPT_FORMAT, PROMPT_FORMAT_KEY
from agentrag.paths import embedded_gguf

log = logging.getLogger(__name__)

Quant = Literal["q8_0", "f16"]
QUANTS: tuple[str, ...] = ("q8_0", "f16")
_GENERATION_TAG = re.compile(r"\{%-?\s*(?:end)?generation\s*-?%\}")
_TOKENIZER_KEYS = ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.merges",
                   "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                   "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
                   "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_space_prefix")


def gguf_path(out: str | os.PathLike[str], quant: str) -> Path:
    """Where ``agentrag train`` writes the GGUF of its checkpoint: ``OUT/checkpoint.<quant>.gguf``."""
    return Path(out) / f"checkpoint.{quant}.gguf"


def strip_generation_markers(template: str) -> str:
    """The template without ``{% generation %}`` / ``{% endgeneration %}`` (transformers' mask
    extension; they change nothing in the rendered text, and plain Jinja does not know them)."""
    return _GENERATION_TAG.sub("", template)


def permute_rope(w: Any, n_head: int) -> Any:
    """Rows of a q/k projection from rotate-half (HF) to interleaved (llama.cpp) RoPE order."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _rope_theta(config: Any) -> float:
    theta = getattr(config, "rope_theta", None)
    params = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    if theta is None:
        theta = params.get("rope_theta")
    kind = params.get("rope_type", params.get("type", "default"))
    if kind not in (None, "default"):
        raise UserError(f"rope scaling {kind!r} is not supported by the GGUF writer; use llama.cpp's "
                        "convert_hf_to_gguf.py")
    return float(theta if theta is not None else 10000.0)


def _tensor_name(hf: str) -> str | None:
    """llama.cpp's name for a Llama tensor (None: not written, e.g. RoPE caches)."""
    fixed = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    if hf in fixed:
        return fixed[hf]
    m = re.fullmatch(r"model\.layers\.(\d+)\.(.+)\.weight", hf)
    if m is None:
        return None
    part = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
            "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
            "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
            "mlp.down_proj": "ffn_down"}.get(m.group(2))
    if part is None:
        raise UserError(f"unexpected Llama tensor {hf!r}; use llama.cpp's convert_hf_to_gguf.py")
    return f"blk.{m.group(1)}.{part}.weight"


def _reference_tokenizer(reference: Path, tokens: list[str]) -> dict[str, Any]:
    """The tokenizer metadata of ``reference``, after checking its tokens equal ``tokens``."""
    import gguf

    reader = gguf.GGUFReader(str(reference))
    ref_tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    if ref_tokens != tokens:
        raise UserError(f"the checkpoint's tokenizer ({len(tokens)} tokens) differs from the reference GGUF "
                        f"{str(reference)!r} ({len(ref_tokens)} tokens); the GGUF writer supports checkpoints "
                        "with the embedded model's (SmolLM2) tokenizer; convert others with llama.cpp's "
                        "convert_hf_to_gguf.py")
    out = {k: reader.fields[k].contents() for k in _TOKENIZER_KEYS if k in reader.fields}
    out["tokenizer.ggml.token_type"] = reader.fields["tokenizer.ggml.token_type"].contents()
    return out


def write_gguf(checkpoint: str | os.PathLike[str], out: str | os.PathLike[str], quant: str = "q8_0",
               reference: str | os.PathLike[str] | None = None) -> Path:
    """Write ``checkpoint`` (a HF Llama directory) as GGUF ``out`` (``q8_0`` or ``f16``); returns ``out``.

    Written to a temporary file first and renamed, so a crash leaves no partial GGUF; an existing
    ``out`` is never written over (UserError).
    """
    if quant not in QUANTS:
        raise UserError(f"GGUF quantization {quant!r}: expected one of {', '.join(QUANTS)}")
    for module in ("torch", "transformers", "gguf"):
        require(module, "train", purpose="writing a GGUF file")
    import gguf
    import numpy as np
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    src, dst = Path(checkpoint), Path(out)
    if not (src / "config.json").is_file():
        raise UserError(f"{str(src)!r} is not a Hugging Face checkpoint directory (no config.json)")
    if dst.exists():
        raise UserError(f"{str(dst)!r} exists; remove it or choose another path (it is never written over)")
    config = AutoConfig.from_pretrained(str(src), local_files_only=True)
    if config.model_type != "llama":
        raise UserError(f"{str(src)!r} is a {config.model_type!r} model; the GGUF writer supports Llama-"
                        "architecture checkpoints (SmolLM2); convert others with llama.cpp's convert_hf_to_gguf.py")
    n_head, n_kv = int(config.num_attention_heads), int(config.num_key_value_heads)
    head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // n_head)
    if head_dim * n_head != config.hidden_size:
        raise UserError(f"{str(src)!r}: head_dim {head_dim} x {n_head} heads != hidden_size {config.hidden_size}")
    tok = AutoTokenizer.from_pretrained(str(src), local_files_only=True)
    vocab = tok.get_vocab()
    tokens = [""] * len(vocab)
    for piece, i in vocab.items():
        tokens[i] = piece
    meta = _reference_tokenizer(Path(reference) if reference else embedded_gguf(), tokens)
    template = strip_generation_markers(tok.chat_template or "")
    if not template:
        raise UserError(f"{str(src)!r}: the tokenizer has no chat template (`agentrag train` saves one)")

    model = AutoModelForCausalLM.from_pretrained(str(src), local_files_only=True, dtype=torch.float32)
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    tied = bool(getattr(config, "tie_word_embeddings", False))
    del model

    qtype = gguf.GGMLQuantizationType.Q8_0 if quant == "q8_0" else gguf.GGMLQuantizationType.F16
    w = gguf.GGUFWriter(None, "llama")
    w.add_name(src.resolve().parent.name + "/" + src.name)
    w.add_string(PROMPT_FORMAT_KEY, PROMPT_FORMAT)
    w.add_context_length(int(config.max_position_embeddings))
    w.add_embedding_length(int(config.hidden_size))
    w.add_block_count(int(config.num_hidden_layers))
    w.add_feed_forward_length(int(config.intermediate_size))
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_rope_freq_base(_rope_theta(config))
    w.add_layer_norm_rms_eps(float(config.rms_norm_eps))
    w.add_vocab_size(len(tokens))
    w.add_rope_dimension_count(head_dim)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quant == "q8_0" else gguf.LlamaFileType.MOSTLY_F16)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_tokenizer_model(meta.pop("tokenizer.ggml.model"))
    w.add_tokenizer_pre(meta.pop("tokenizer.ggml.pre", "default"))
    w.add_token_list(tokens)
    w.add_token_types(meta.pop("tokenizer.ggml.token_type"))
    w.add_token_merges(meta.pop("tokenizer.ggml.merges"))
    for key, add in (("bos_token_id", w.add_bos_token_id), ("eos_token_id", w.add_eos_token_id),
                     ("unknown_token_id", w.add_unk_token_id), ("padding_token_id", w.add_pad_token_id),
                     ("add_bos_token", w.add_add_bos_token), ("add_space_prefix", w.add_add_space_prefix)):
        if f"tokenizer.ggml.{key}" in meta:
            add(meta[f"tokenizer.ggml.{key}"])
    w.add_chat_template(template)

    for hf_name, data in state.items():
        name = _tensor_name(hf_name)
        if name is None or (name == "output.weight" and tied):
            continue
        if name.endswith("attn_q.weight"):
            data = permute_rope(data, n_head)
        elif name.endswith("attn_k.weight"):
            data = permute_rope(data, n_kv)
        if data.ndim == 1:
            w.add_tensor(name, data.astype(np.float32))
        elif qtype == gguf.GGMLQuantizationType.F16:
            w.add_tensor(name, data.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)

    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + f".tmp{os.getpid()}")
    try:
        w.write_header_to_file(tmp)
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        if dst.exists():
            raise UserError(f"{str(dst)!r} appeared while writing; it is not written over")
        os.replace(tmp, dst)
    finally:
        if tmp.exists():
            tmp.unlink()
    log.info("wrote %s (%s, %.1f MB) from %s", dst, quant, dst.stat().st_size / 1e6, src)
    return dst


def gguf_info(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A few facts of a GGUF file (architecture, file type, prompt format) for reports and tests."""
    import gguf

    reader = gguf.GGUFReader(str(path))

    def get(key: str) -> Any:
        return reader.fields[key].contents() if key in reader.fields else None

    return {"architecture": get("general.architecture"), "file_type": get("general.file_type"),
            "prompt_format": get(PROMPT_FORMAT_KEY), "tensors": len(reader.tensors),
            "types": sorted({t.tensor_type.name for t in reader.tensors})}


__all__ = ["write_gguf", "gguf_path", "gguf_info", "permute_rope", "strip_generation_markers", "QUANTS"]
