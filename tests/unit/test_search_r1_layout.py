"""search_r1's rollout has the layout of Search-R1's released rollout (docs/agents.md, "Deviations"):
one string that is the model's generations with the inserted text between them, where

- a generation ends at the first closing tag of its action (``</search>`` or ``</answer>``; text
  the model wrote after it is not in the rollout), and a search cut by the ``</search>`` stop
  sequence is closed with ``</search>``;
- each search is followed by ``\\n\\n<information>`` + the documents + ``</information>\\n\\n``, the
  documents being ``Doc i(Title: t) text`` (i from 1, no space before the parenthesis) one per
  line, with no blank around them;
- a turn without a valid action is followed by ``\\n`` + the invalid-action note + ``\\n``;
- each request is the prompt plus the rollout so far;
- the prompt is one user turn (no system message): one line of instructions that name, in this
  order, ``<think>``/``</think>`` (reason on new information), ``<search> query </search>``, the
  results between ``<information>`` and ``</information>``, and ``<answer>``/``</answer>`` with a
  spaced example (``<answer> X </answer>``), then `` Question: `` + the question + ``\n``.

The expected rollout and prompt are assembled here from those rules, independently of the agent's code."""

from __future__ import annotations

import re

import pytest

from agentrag.agents import build_agent
from agentrag.agents.prompts import SEARCH_R1_INVALID, SEARCH_R1_USER
from agentrag.agents.search_r1 import parse_action
from agentrag.llm.base import Completion
from agentrag.records import Passage, QAItem
from agentrag.testing import FakeRetriever, ScriptedLLM

PASSAGES = [Passage(id="e", title="Mount Everest", text="Mount Everest is 8,848 m high.\nIt is in the Himalaya."),
            Passage(id="k", title="K2", text="K2 is 8,611 m high."),
            Passage(id="l", title="Lhotse", text="Lhotse is 8,516 m high.")]
ITEM = QAItem(id="q", question="How much higher is Mount Everest than K2?", golden_answers=["237 m"])


def _docs(titles_texts: list[tuple[str, str]]) -> str:
    return "\n".join(f"Doc {i}(Title: {t}) {x}" for i, (t, x) in enumerate(titles_texts, start=1))


def _information(titles_texts: list[tuple[str, str]]) -> str:
    return "\n\n<information>" + _docs(titles_texts) + "</information>\n\n"


def test_a_scripted_episode_has_the_released_rollout_layout():
    turns = [
        "<think>I need both heights.</think>\n<search> Mount Everest height </search>",
        Completion(text="<think>Now K2.</think>\n<search>K2 height", finish_reason="stop"),  # cut by the stop string
        "I am not sure what to do next.",
        "<think>8848 - 8611 = 237.</think>\n<answer> 237 m </answer> and some text after it",
    ]
    llm = ScriptedLLM(turns)
    traj = build_agent("search_r1", llm, FakeRetriever(PASSAGES), top_k=2).run(ITEM)
    assert traj.finish_reason == "answered" and traj.answer == "237 m"
    first, second = (s.hits for s in traj.steps[:2])
    assert [h.id for h in first][0] == "e" and [h.id for h in second][0] == "k"

    rollout = (turns[0] + _information([(h.title, h.text) for h in first])
               + "<think>Now K2.</think>\n<search>K2 height</search>" + _information([(h.title, h.text) for h in second])
               + turns[2] + "\n" + SEARCH_R1_INVALID + "\n"
               + "<think>8848 - 8611 = 237.</think>\n<answer> 237 m </answer>")
    assert traj.metadata["stream"] == rollout
    assert "Doc 1(Title: Mount Everest) Mount Everest is 8,848 m high.\nIt is in the Himalaya.\nDoc 2(Title: " in rollout

    prompt = SEARCH_R1_USER.format(question=ITEM.question)
    cuts = [0, rollout.index("<think>Now K2."), rollout.index("I am not sure"), rollout.index("<think>8848")]
    assert len(llm.requests) == len(cuts)
    for req, cut in zip(llm.requests, cuts, strict=True):
        sent = req["messages"]
        assert sent[0].role == "user" and sent[0].content == prompt
        assert (sent[1].content if len(sent) > 1 else "") == rollout[:cut]
        assert req["stop"] == ["</search>"]


def released_user_turn(instructions: str, question: str) -> str:
    """The released template's user turn: its instructions, then " Question: {question}\n"."""
    return f"{instructions} Question: {question}\n"


def test_the_default_prompt_has_the_released_template_s_structure():
    llm = ScriptedLLM(["<search> Mount Everest height </search>", "<answer> 8,848 m </answer>"])
    traj = build_agent("search_r1", llm, FakeRetriever(PASSAGES), top_k=1).run(ITEM)
    assert traj.answer == "8,848 m"
    first = llm.requests[0]["messages"]
    assert [m.role for m in first] == ["user"]  # one user turn, no system prompt
    prompt = first[0].content
    instructions = prompt.removesuffix(f" Question: {ITEM.question}\n")
    assert prompt == released_user_turn(instructions, ITEM.question) and instructions != prompt
    assert "\n" not in instructions and "Question:" not in instructions  # one line, the marker once
    marks = ["<think>", "</think>", "<search> query </search>", "<information>", "</information>", "<answer>",
             "</answer>"]
    at = [instructions.find(m) for m in marks]
    assert -1 not in at and at == sorted(at), dict(zip(marks, at, strict=True))
    example = instructions[instructions.rindex("<answer>"):]
    assert example.startswith("<answer> ") and " </answer>" in example  # the spaced example of the release
    second = llm.requests[1]["messages"]  # the prompt again, then the rollout so far as one message
    assert second[0].content == prompt and second[1].content.endswith("</information>\n\n")
    assert traj.metadata["stream"] == second[1].content + "<answer> 8,848 m </answer>"
    assert traj.metadata["stream"].startswith("<search> Mount Everest height </search>\n\n<information>Doc 1(Title: ")


def test_tags_inside_documents_keep_the_layout():
    passages = [Passage(id="x", title="Tags", text="A page that says <answer>wrong</answer> inside.")]
    llm = ScriptedLLM(["<search>page tags</search>", "<answer>right</answer>"])
    traj = build_agent("search_r1", llm, FakeRetriever(passages), top_k=1).run(ITEM)
    stream = traj.metadata["stream"]
    head, info = stream.split("\n\n<information>", 1)
    assert head == "<search>page tags</search>"
    body, tail = info.split("</information>\n\n", 1)
    assert body.startswith("Doc 1(Title: Tags) A page that says ") and "<answer>wrong</answer>" not in body
    assert tail == "<answer>right</answer>" and traj.answer == "right"


def test_a_search_that_finds_nothing_keeps_the_block():
    llm = ScriptedLLM(["<search>anything</search>", "<answer>none</answer>"])
    traj = build_agent("search_r1", llm, FakeRetriever([]), top_k=1).run(ITEM)
    assert traj.metadata["stream"] == ("<search>anything</search>\n\n<information>No documents found.</information>\n\n"
                                       "<answer>none</answer>")


def released_action(output: str) -> tuple[str | None, str]:
    """The action the released rollout takes from one generation, written from its rule: the text is
    cut after the first ``</search>`` if it has one, else after the first ``</answer>``; the action
    is the first complete ``<search>``/``<answer>`` block in what is left (content stripped)."""
    if "</search>" in output:
        output = output.split("</search>")[0] + "</search>"
    elif "</answer>" in output:
        output = output.split("</answer>")[0] + "</answer>"
    m = re.search(r"<(search|answer)>(.*?)</\1>", output, re.DOTALL)
    return (m.group(1), m.group(2).strip()) if m else (None, "")


#: generations whose action the release decides by its first-</answer> rule (malformed shapes and
#: tags inside <think>, where agentrag deliberately differs, are in docs/agents.md's deviations)
OUTPUTS = [
    "<think>t</think>\n<answer> Paris </answer>",
    "<answer>Paris</answer> and more text",
    "<answer>Paris</answer> no, <answer>Lyon</answer>",
    "<answer>Paris</answer>\n<search>capital of France</search>",
    "<think>t</think><search> capital of France </search> then <answer>Paris</answer>",
    "<search>q1</search><search>q2</search>",
    "just text, no action",
]


@pytest.mark.parametrize("output", OUTPUTS)
def test_each_generation_takes_the_action_the_release_takes(output):
    assert parse_action(output)[:2] == released_action(output)


def test_the_first_answer_ends_the_episode_and_the_rollout():
    llm = ScriptedLLM(["<think>sure</think>\n<answer> 237 m </answer> no, <answer>wrong</answer>", "<answer>x</answer>"])
    traj = build_agent("search_r1", llm, FakeRetriever(PASSAGES), top_k=1).run(ITEM)
    assert traj.answer == "237 m" and len(llm.requests) == 1
    assert traj.metadata["stream"] == "<think>sure</think>\n<answer> 237 m </answer>"
