"""Loading a model from the Python API prints no third-party "Loading weights" bars (agentrag
reports its own progress), leaves the user's setting as it was, and shows them when asked."""

from __future__ import annotations

import pytest
from transformers.utils import logging as hf_logging

from agentrag._extras import quiet_loading
from agentrag.kb.embedders import SentenceTransformerEmbedder

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_embedder_load_prints_no_weight_bar_and_restores_the_setting(capfd, monkeypatch):
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    hf_logging.enable_progress_bar()
    SentenceTransformerEmbedder()
    assert "Loading weights" not in capfd.readouterr().err
    assert hf_logging.is_progress_bar_enabled()  # the user's setting is back


def test_bars_shown_when_the_user_asks(monkeypatch):
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "0")
    hf_logging.enable_progress_bar()
    with quiet_loading():
        assert hf_logging.is_progress_bar_enabled()
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS")
    with quiet_loading():
        assert not hf_logging.is_progress_bar_enabled()
    assert hf_logging.is_progress_bar_enabled()
