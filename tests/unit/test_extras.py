"""A missing optional dependency ends in a UserError naming the package and the extra to install."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from agentrag._extras import require
from agentrag.errors import UserError
from agentrag.testing import FakeRetriever, ScriptedLLM


def _sft_file(tmp_path):
    f = tmp_path / "sft.jsonl"
    f.write_text(json.dumps({"messages": [{"role": "user", "content": "q"},
                                          {"role": "assistant", "content": "a"}]}) + "\n")
    return f


def _dense():
    from agentrag.kb.indexes import DenseIndex

    DenseIndex(4).add(np.ones((1, 4), dtype=np.float32))


def _bm25():
    from agentrag.kb.indexes import BM25Index

    BM25Index().index(["a small text"])


def _embedder(backend):
    from agentrag.kb.embedders import load_embedder

    return lambda: load_embedder(None, backend=backend)


def _kb_app():
    from agentrag.kb.server import create_app

    create_app(FakeRetriever([]))


def _kb_serve():
    from agentrag.kb.server import serve

    serve(FakeRetriever([]), port=1)


def _llm_app():
    from agentrag.llm.server import create_app

    create_app(ScriptedLLM())


def _llm_serve():
    from agentrag.llm.server import serve

    serve(ScriptedLLM(), port=1)


def _llama(tmp_path):
    from agentrag.llm.embedded import load_llama

    return lambda: load_llama(tmp_path / "never-loaded.gguf", 64, 1)


def _tokenizer(tmp_path):
    from agentrag.train.model import load_tokenizer

    return lambda: load_tokenizer("embedded")


def _gguf_tokenizer(tmp_path):
    from agentrag.train.model import load_tokenizer

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    return lambda: load_tokenizer(str(gguf))


def _train(tmp_path):
    from agentrag.train.config import SFTTrainConfig
    from agentrag.train.sft import train_sft

    model = tmp_path / "hf_model"  # a model directory: valid, and never loaded here
    model.mkdir()
    return lambda: train_sft(_sft_file(tmp_path), tmp_path / "run", SFTTrainConfig(model=str(model)))


CASES = [
    ("faiss", "faiss-cpu", "kb", lambda tmp: _dense),
    ("bm25s", "bm25s", "kb", lambda tmp: _bm25),
    ("Stemmer", "PyStemmer", "kb", lambda tmp: _bm25),
    ("sentence_transformers", "sentence-transformers", "kb", lambda tmp: _embedder("torch")),
    ("onnxruntime", "onnxruntime", "kb", lambda tmp: _embedder("onnx-int8")),
    ("fastapi", "fastapi", "kb", lambda tmp: _kb_app),
    ("uvicorn", "uvicorn", "kb", lambda tmp: _kb_serve),
    ("fastapi", "fastapi", "llm", lambda tmp: _llm_app),
    ("uvicorn", "uvicorn", "llm", lambda tmp: _llm_serve),
    ("llama_cpp", "llama-cpp-python", "llm", _llama),
    ("transformers", "transformers", "train", _tokenizer),
    ("gguf", "gguf", "train", _gguf_tokenizer),
    ("trl", "trl", "train", _train),
    ("datasets", "datasets", "train", _train),
]


@pytest.mark.parametrize(("module", "dist", "extra", "make"), CASES,
                         ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_missing_module_names_the_extra(module, dist, extra, make, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTRAG_CACHE", str(tmp_path / "cache"))
    call = make(tmp_path)
    monkeypatch.setitem(sys.modules, module, None)  # what Python does for a module that is not installed
    with pytest.raises(UserError) as err:
        call()
    msg = str(err.value)
    assert f"needs {dist}" in msg and f"pip install 'agentrag[{extra}]'" in msg, msg
    assert not (tmp_path / "run").exists()  # training fails before writing its run directory


def test_require_returns_the_module_and_reports_nested_failures(tmp_path, monkeypatch):
    assert require("json", "kb") is json
    pkg = tmp_path / "agentrag_fake_extra"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import agentrag_missing_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UserError) as err:
        require("agentrag_fake_extra", "kb", purpose="the fake feature")
    assert str(err.value) == ("the fake feature needs agentrag_fake_extra (No module named "
                              "'agentrag_missing_dependency'): pip install 'agentrag[kb]'")
