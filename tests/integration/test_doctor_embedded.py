"""Each embedded component, checked the way the pipelines use it, in a subprocess: a native crash
(like llama.cpp's AMX repack segfault on multi-token prompts) fails these tests by name."""

from __future__ import annotations

import pytest

from agentrag.doctor import CHECKS, run_check

pytestmark = [pytest.mark.slow, pytest.mark.integration]


@pytest.mark.parametrize("name", list(CHECKS))
def test_doctor_check_passes_in_subprocess(name: str) -> None:
    res = run_check(name, timeout=600)
    assert res.ok, f"{res.title}: {res.detail}"


def test_embedded_llm_multi_token_chat_completion_in_subprocess() -> None:
    res = run_check("llm-chat", timeout=600)
    assert res.ok, res.detail
    prompt_tokens = int(res.detail.split(" prompt")[0])
    assert prompt_tokens > 1  # a multi-token prompt went through llama_decode
