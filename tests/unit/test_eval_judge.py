from __future__ import annotations

import pytest

from agentrag.errors import LLMError, ParseError
from agentrag.eval.judge import JUDGE_SCHEMA, LLMJudge, parse_verdict
from agentrag.testing import ScriptedLLM


def test_score_uses_json_schema_and_temperature_zero():
    llm = ScriptedLLM(['{"reason": "same person", "score": 2}'])
    judge = LLMJudge(llm)
    assert judge.score("Who?", "Obama", ["Barack Obama"]) == 2
    req = llm.requests[0]
    assert req["response_format"]["type"] == "json_schema"
    assert req["response_format"]["json_schema"]["schema"] == JUDGE_SCHEMA
    assert req["temperature"] == 0.0
    user = req["messages"][-1].content
    assert "Obama" in user and "Barack Obama" in user and "Who?" in user


@pytest.mark.parametrize("text, score", [
    ('{"reason": "partly", "score": 1}', 1),
    ('Sure! {"reason": "no", "score": 0} done', 0),
    ('{"score": "2", "reason": "x"}', 2),
    ('"score": 1, broken json', 1),
])
def test_parse_verdict_tolerant(text, score):
    assert parse_verdict(text)[0] == score


@pytest.mark.parametrize("text", ['{"score": 5}', "no score here", '{"score": null}'])
def test_parse_verdict_rejects(text):
    with pytest.raises(ParseError):
        parse_verdict(text)


def test_failures_are_recorded_not_raised():
    llm = ScriptedLLM([LLMError("down"), "garbage", ""])
    judge = LLMJudge(llm)
    v1 = judge.assess("q", "a", ["a"])
    assert v1.score is None and "LLMError" in v1.error and not v1.passed
    v2 = judge.assess("q", "a", ["a"])
    assert v2.score is None and v2.raw == "garbage" and "no score" in v2.error
    v3 = judge.assess("q", "a", ["a"])
    assert v3.score is None and v3.error
    with pytest.raises(ParseError):
        LLMJudge(ScriptedLLM(["nothing"])).score("q", "a", ["a"])


def test_empty_prediction_scores_zero_without_a_call():
    llm = ScriptedLLM([])
    v = LLMJudge(llm).assess("q", "  ", ["a"])
    assert v.score == 0 and llm.calls == 0


def test_pass_threshold_is_one():
    judge = LLMJudge(ScriptedLLM(['{"reason": "", "score": 1}', '{"reason": "", "score": 0}']))
    assert judge.assess("q", "a", ["b"]).passed
    assert not judge.assess("q", "a", ["b"]).passed
