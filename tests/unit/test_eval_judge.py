from __future__ import annotations

import pytest

from agentrag.errors import LLMError, ParseError
from agentrag.eval.judge import JUDGE_SCHEMA, JudgeReply, LLMJudge, parse_verdict
from agentrag.testing import ScriptedLLM


def test_score_uses_json_schema_and_temperature_zero():
    llm = ScriptedLLM(['{"reason": "same person", "score": 2}'])
    judge = LLMJudge(llm)
    assert judge.score("Who?", "Obama", ["Barack Obama"]) == 2
    req = llm.requests[0]
    assert req["response_format"]["type"] == "json_schema"
    assert req["response_format"]["json_schema"]["schema"] == JUDGE_SCHEMA
    assert JUDGE_SCHEMA["properties"]["score"]["enum"] == [0, 1, 2]
    assert JUDGE_SCHEMA["properties"]["reason"]["maxLength"] == 400 and not JUDGE_SCHEMA["additionalProperties"]
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


@pytest.mark.parametrize("text", ['{"score": 5}', "no score here", '{"score": null}', '{"score": 1.5}',
                                  '{"reason": "x", "score": 2.0}', '{"score": true}', '"score": 1.5 cut'])
def test_parse_verdict_rejects(text):
    with pytest.raises(ParseError):
        parse_verdict(text)


def test_bad_output_is_a_verdict_error_and_an_outage_is_raised():
    llm = ScriptedLLM([LLMError("down", is_retryable=True), "garbage", "", LLMError("HTTP 401", is_retryable=False)])
    judge = LLMJudge(llm)
    with pytest.raises(LLMError, match="down"):  # an outage: the judgement stays pending
        judge.assess("q", "a", ["a"])
    v2 = judge.assess("q", "a", ["a"])
    assert v2.score is None and v2.raw == "garbage" and "no score" in v2.error
    v3 = judge.assess("q", "a", ["a"])
    assert v3.score is None and v3.error
    with pytest.raises(LLMError, match="401"):
        judge.assess("q", "a", ["a"])
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


def test_judge_reply_model_bounds_and_context_limit_is_a_verdict_error():
    from pydantic import ValidationError

    from agentrag.errors import ContextLimitError

    with pytest.raises(ValidationError):
        JudgeReply(reason="x" * 401, score=1)
    with pytest.raises(ValidationError):
        JudgeReply(reason="x", score=3)  # type: ignore[arg-type]
    assert parse_verdict('{"reason": "same", "score": 2}') == (2, "same")
    v = LLMJudge(ScriptedLLM([ContextLimitError("over 8192 tokens")])).assess("q", "a", ["a"])
    assert v.score is None and v.error.startswith("context_limit")
