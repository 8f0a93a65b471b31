"""The judge rubric, tested so that it can fail (issue 24 item 3).

The stand-in judge never sees a label: it reads the rubric from the system prompt it is sent
and applies the rules stated there (each score line's phrases map to checks on the normalized
words of the reference and the prediction). The labelled pairs follow the rubric's rules, so the
test passes only while the prompt states them; a rewritten rubric (partial answers scoring 1,
contradicting extras allowed) changes the outcome, and a test below shows it does.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Callable
from typing import Any

import pytest

import agentrag.eval.judge as judge_module
from agentrag.agents import build_agent
from agentrag.eval.judge import LLMJudge
from agentrag.eval.runner import score_item
from agentrag.records import Message, Passage, QAItem, ToolCall
from agentrag.testing import FakeRetriever, ScriptedLLM

#: (question, gold answers, prediction, the score the rubric's rules give)
LABELLED: list[tuple[str, list[str], str, int]] = [
    ("Who founded Rome?", ["Romulus"], "Romulus", 2),
    ("Who founded Rome?", ["Romulus"], "romulus.", 2),  # casing and punctuation ignored
    ("When was X born?", ["4 July 1901"], "July 4, 1901", 2),  # formatting ignored
    ("Who wrote it?", ["Samuel Clemens", "Mark Twain"], "Mark Twain", 2),  # any reference
    ("Who founded Rome?", ["Romulus"], "Romulus, with his twin brother Remus", 1),  # extra, consistent
    ("What is the capital of Australia?", ["Canberra"], "Canberra, in the Australian Capital Territory", 1),
    ("When was X born?", ["4 July 1901"], "1901", 0),  # less precise key fact
    ("Who was the founder?", ["Ott Brem"], "Brem", 0),  # part of the key information
    ("Where was X born?", ["Lyon"], "France", 0),  # different
    ("Who founded Rome?", ["Romulus"], "Remus", 0),  # different
    ("Who founded Rome?", ["Romulus"], "Romulus, but it was not him", 0),  # contradicting extra
    ("Who founded Rome?", ["Romulus"], "I could not find it", 0),  # a refusal
]

_CONTRAST = {"but", "not", "however", "instead", "although", "never"}


def _words(text: str, prompt: str) -> set[str]:
    """The words of ``text`` as the rubric's preamble says to compare them."""
    if "casing" in prompt:
        text = text.lower()
    if "punctuation" in prompt or "formatting" in prompt:
        text = text.translate(str.maketrans({c: " " for c in string.punctuation}))
    return {w for w in text.split() if w not in {"a", "an", "the"}}


#: phrases of a score line -> the check they state, on (reference words, prediction words)
CHECKS: dict[str, Callable[[set[str], set[str]], bool]] = {
    "same key information": lambda g, p: g <= p,
    "nothing missing": lambda g, p: g <= p,
    "nothing added": lambda g, p: p <= g,
    "all the key information": lambda g, p: g <= p,
    "part of the key information": lambda g, p: bool(g & p),
    "some of the key information": lambda g, p: bool(g & p),
    "adds extra information": lambda g, p: bool(p - g),
    "does not contradict": lambda g, p: not (p - g) & _CONTRAST,
}


def rubric_rules(prompt: str) -> dict[int, list[Callable[[set[str], set[str]], bool]]]:
    """The checks each non-zero score line of the rubric states (0 is 'otherwise')."""
    rules: dict[int, list[Callable[[set[str], set[str]], bool]]] = {}
    for score, line in re.findall(r"^([12]) - (.*)$", prompt, flags=re.MULTILINE):
        checks = [check for phrase, check in CHECKS.items() if phrase in line.lower()]
        assert checks, f"the rubric line for {score} states no rule this judge can apply: {line!r}"
        rules[int(score)] = checks
    assert set(rules) == {1, 2} and re.search(r"^0 - otherwise", prompt, flags=re.MULTILINE), prompt
    return rules


def rule_following_judge(messages: list[Message], **kwargs: Any) -> str:
    """A judge model that applies the rules of the rubric it is sent (never a label)."""
    assert kwargs["temperature"] == 0.0 and kwargs["response_format"]["type"] == "json_schema"
    prompt, user = messages[0].content or "", messages[1].content or ""
    golds = re.findall(r"^- (.*)$", user.split("Predicted answer:")[0], flags=re.MULTILINE)
    pred = user.rsplit("Predicted answer: ", 1)[1]
    rules = rubric_rules(prompt)
    best = 0
    for gold in golds:
        g, p = _words(gold, prompt), _words(pred, prompt)
        best = max([best] + [s for s in (2, 1) if all(check(g, p) for check in rules[s])][:1])
    return json.dumps({"reason": "rules applied", "score": best})


def grade(question: str, golds: list[str], pred: str) -> int:
    """The score of ``pred`` through the eval pipeline: an agent answers, score_item judges it."""
    item = QAItem(id="j", question=question, golden_answers=golds)
    agent = build_agent("plan_step", ScriptedLLM(["plan", ToolCall(name="Final_Answer", arguments={"answer": pred})]),
                        FakeRetriever([Passage(id="a", text="x")]))
    res = score_item(item, agent.run(item), LLMJudge(ScriptedLLM(default=rule_following_judge)))
    assert res.judge_error is None and res.correct is (res.judge is not None and res.judge >= 1)
    assert res.judge is not None
    return res.judge


@pytest.mark.parametrize("question, golds, pred, score", LABELLED, ids=[p[2] for p in LABELLED])
def test_labelled_pairs_get_the_score_the_rubric_states(question, golds, pred, score):
    assert grade(question, golds, pred) == score


MUTATIONS = {
    # partial answers score 1: "1901" for a full date, "Brem" for "Ott Brem" now pass
    "partial answers score 1": ("1 - the prediction contains all the key information of a reference answer and "
                                "also adds extra information that does not contradict it.",
                                "1 - the prediction contains part of the key information of a reference answer."),
    # contradicting extras allowed
    "contradictions allowed": ("also adds extra information that does not contradict it",
                               "also adds extra information"),
    # equivalence without 'nothing added': extras score 2
    "extras are equivalent": ("nothing missing and nothing added", "nothing missing"),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_a_changed_rubric_changes_the_outcome(monkeypatch, name):
    old, new = MUTATIONS[name]
    assert old in judge_module.JUDGE_SYSTEM
    monkeypatch.setattr(judge_module, "JUDGE_SYSTEM", judge_module.JUDGE_SYSTEM.replace(old, new))
    wrong = [pred for q, golds, pred, score in LABELLED if grade(q, golds, pred) != score]
    assert wrong, f"rubric mutation {name!r} went unnoticed"


@pytest.mark.parametrize("reply", ['{"reason": "x", "score": 1.5}', '{"reason": "x", "score": 1.0}',
                                   '{"reason": "x", "score": 3}', '{"reason": "x", "score": -1}',
                                   '{"reason": "x", "score": true}', '{"reason": "x", "score": "1.5"}',
                                   '{"reason": "x", "score": null}', '"score": 1.5, cut off'])
def test_non_integer_or_out_of_range_scores_are_judge_errors(reply):
    item = QAItem(id="j", question="Who founded Rome?", golden_answers=["Romulus"])
    agent = build_agent("plan_step", ScriptedLLM(["plan", ToolCall(name="Final_Answer",
                                                                   arguments={"answer": "Romulus"})]),
                        FakeRetriever([Passage(id="a", text="x")]))
    verdict = LLMJudge(ScriptedLLM([reply])).assess(item.question, "Romulus", item.golden_answers)
    assert verdict.score is None and verdict.error
    res = score_item(item, agent.run(item), LLMJudge(ScriptedLLM([reply])))
    assert res.judge is None and res.judge_error  # never truncated to 1, never EM in its place
