"""The library changes no process-wide state: no HF_HUB_OFFLINE, no logging.disable.

Offline behaviour is a default of the CLI entry point (and the Makefile), not of the library.
"""

from __future__ import annotations

import logging
import os
import sys
import types
from pathlib import Path

import numpy as np

import agentrag.cli.main as cli_main
from agentrag.kb.embedders import SentenceTransformerEmbedder, quiet_root_logging_from

SRC = Path(__file__).resolve().parents[2] / "src" / "agentrag"


class _FakeST:
    def __init__(self, name: str, device: str = "cpu") -> None:
        self.name = name
        self.max_seq_length = 128

    def get_sentence_embedding_dimension(self) -> int:
        return 3

    def encode(self, texts, **kwargs):
        return np.ones((len(texts), 3), dtype=np.float32)


def test_embedder_takes_any_name_and_leaves_the_environment_alone(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(SentenceTransformer=_FakeST))
    emb = SentenceTransformerEmbedder("intfloat/e5-small-v2")
    assert emb.model.name == "intfloat/e5-small-v2"  # handed to sentence-transformers as given
    assert emb.query_prefix == "query: " and emb.embed(["x"]).shape == (1, 3)
    assert "HF_HUB_OFFLINE" not in os.environ


def test_cli_entry_point_defaults_to_offline_but_respects_the_user(monkeypatch):
    seen = []
    monkeypatch.setattr(cli_main, "app", lambda: seen.append(os.environ.get("HF_HUB_OFFLINE")))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    cli_main.main()
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    cli_main.main()
    assert seen == ["1", "0"]


def test_quiet_quantizer_logging_touches_nothing_else(tmp_path, caplog):
    pkg = tmp_path / "noisy"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    noisy = types.ModuleType("noisy")
    noisy.__file__ = str(pkg / "__init__.py")
    root = logging.getLogger()

    def record(path: str, level: int, name: str = "root") -> logging.LogRecord:
        return logging.LogRecord(name, level, path, 1, "msg", None, None)

    inside = str(pkg / "quantizer.py")
    with caplog.at_level(logging.INFO):
        with quiet_root_logging_from(noisy):
            assert logging.root.manager.disable == 0  # nothing disabled process-wide
            assert root.getEffectiveLevel() == logging.INFO
            assert not root.filter(record(inside, logging.INFO))  # the quantizer's chatter is dropped
            assert root.filter(record(inside, logging.WARNING))  # its warnings are not
            assert root.filter(record(__file__, logging.INFO))  # other root-logger INFO is not
            logging.getLogger("agentrag.test").info("still logged")
        assert root.filter(record(inside, logging.INFO))  # the filter is gone afterwards
    assert "still logged" in caplog.text


def test_library_code_sets_no_process_wide_state():
    offenders = []
    for path in SRC.rglob("*.py"):
        if "cli" in path.relative_to(SRC).parts:
            continue
        text = path.read_text(encoding="utf-8").split('if __name__ == "__main__":')[0]  # programs may
        for needle in ("logging.disable(", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "logging.basicConfig("):
            if needle in text:
                offenders.append(f"{path.relative_to(SRC)}: {needle}")
    assert offenders == []
